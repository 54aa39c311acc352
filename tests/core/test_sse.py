from __future__ import annotations

import orjson
import pytest

from litellm_perfkit._core._sse import SseScanner, is_event_stream


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


ANTHROPIC = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
RESPONSES = (
    b'event: response.created\ndata: {"type":"response.created","response":{"id":"r"}}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"output_tokens":1}}}\n\n'
)


@pytest.mark.parametrize(("stream", "token_event", "chunks"), [(ANTHROPIC, 2, 4), (RESPONSES, 1, 3)])
def test_anthropic_and_responses_streams_find_their_first_token(stream: bytes, token_event: int, chunks: int) -> None:
    parts = [part + b"\n\n" for part in stream.split(b"\n\n") if part]
    scanner = SseScanner()
    assert feed_all(scanner, parts) == [token_event]
    assert (scanner.chunks, scanner.done_events) == (chunks, 0)


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


def test_a_response_is_an_event_stream_by_its_content_type_header() -> None:
    assert is_event_stream([(b"x-other", b"text/event-stream"), (b"Content-Type", b"text/event-stream; charset=utf-8")])
    assert not is_event_stream([(b"content-type", b"application/json")])
    assert not is_event_stream([])
