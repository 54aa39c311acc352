from __future__ import annotations

import orjson
import pytest

from litellm_perfkit._core._sse import SseScanner, has_content_delta


def event(delta: dict[str, object] | None = None, **choice: object) -> bytes:
    body = {"choices": [{"index": 0, **({"delta": delta} if delta is not None else {}), **choice}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


ROLE = event({"role": "assistant"})
EMPTY = event({"content": ""})
TOKEN = event({"content": "Hello"})
DONE = b"data: [DONE]\n\n"


def feed_all(scanner: SseScanner, parts: list[bytes]) -> list[int]:
    return [i for i, part in enumerate(parts) if scanner.feed(part)]


def test_role_only_and_empty_chunks_are_not_the_first_token() -> None:
    scanner = SseScanner()
    assert feed_all(scanner, [ROLE, EMPTY, TOKEN, TOKEN, DONE]) == [2]
    assert scanner.chunks == 4
    assert scanner.done_events == 1


@pytest.mark.parametrize(
    "delta",
    [
        {"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]},
        {"reasoning_content": "thinking"},
        {"reasoning": "thinking"},
        {"function_call": {"name": "f"}},
    ],
)
def test_tool_call_and_reasoning_deltas_count(delta: dict[str, object]) -> None:
    assert SseScanner().feed(ROLE + event(delta)) is True


def test_completions_text_counts_and_usage_chunk_does_not() -> None:
    assert has_content_delta({"choices": [{"text": "hi"}]})
    assert not has_content_delta({"choices": [], "usage": {"completion_tokens": 3}})
    assert not has_content_delta({"choices": [{"delta": {"role": "assistant", "content": None}}]})


def test_events_split_across_body_messages_are_counted_once() -> None:
    stream = ROLE + TOKEN * 5 + DONE
    for size in (1, 2, 3, 7, 13, 64):
        scanner = SseScanner()
        parts = [stream[i : i + size] for i in range(0, len(stream), size)]
        hits = feed_all(scanner, parts)
        assert len(hits) == 1, size
        # The first token is reported with the part that completes its event.
        first_token_end = len(ROLE) + len(TOKEN)
        assert hits[0] == (first_token_end - 1) // size
        assert (scanner.chunks, scanner.done_events) == (6, 1), size


def test_crlf_streams_and_data_inside_content() -> None:
    tricky = event({"content": "data: [DONE] is just text"}).replace(b"\n", b"\r\n")
    scanner = SseScanner()
    assert feed_all(scanner, [ROLE.replace(b"\n", b"\r\n"), tricky, DONE]) == [1]
    assert (scanner.chunks, scanner.done_events) == (2, 1)


def test_malformed_json_is_skipped() -> None:
    scanner = SseScanner()
    assert feed_all(scanner, [b"data: {not json\n\n", TOKEN]) == [1]
