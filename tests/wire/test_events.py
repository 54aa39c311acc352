from __future__ import annotations

import pytest

from litellm_perfkit._wire._events import SseDecoder, carries_output, data_has_token, output_tokens, stream_error


@pytest.mark.parametrize(
    "event",
    [
        {"choices": [{"delta": {"content": "Hi"}}]},
        {"choices": [{"text": "hi"}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]},
        {"choices": [{"delta": {"reasoning_content": "hm"}}]},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{"}},
        {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "hm"}},
        {"type": "response.output_text.delta", "delta": "Hi"},
        {"type": "response.function_call_arguments.delta", "delta": "{"},
    ],
)
def test_output_events(event: dict[str, object]) -> None:
    assert carries_output(event)


@pytest.mark.parametrize(
    "event",
    [
        {"choices": [], "usage": {"completion_tokens": 3}},
        {"choices": [{"delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"delta": {"content": ""}}]},
        {"type": "message_start", "message": {"content": [{"type": "text", "text": "x"}]}},
        {"type": "content_block_start", "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": ""}},
        {"type": "response.output_text.delta", "delta": ""},
        {"type": "response.output_text.done", "text": "Hi"},
        {"type": "response.completed", "response": {"output": [{"content": [{"text": "Hi"}]}]}},
        [1, 2],
        "text",
    ],
)
def test_events_without_output(event: object) -> None:
    assert not carries_output(event)


def test_data_has_token_parses_and_tolerates_junk() -> None:
    assert data_has_token(b'{"choices":[{"delta":{"content":"x"}}]}')
    assert not data_has_token(b"{not json")


@pytest.mark.parametrize(
    ("document", "tokens"),
    [
        ({"usage": {"completion_tokens": 7}}, 7),
        ({"usage": {"output_tokens": 5}}, 5),
        ({"type": "response.completed", "response": {"usage": {"output_tokens": 4}}}, 4),
        ({"type": "message_delta", "usage": {"output_tokens": 9}}, 9),
        ({"usage": None}, None),
        ({"usage": {"completion_tokens": True}}, None),
        ([], None),
    ],
)
def test_output_tokens(document: object, tokens: int | None) -> None:
    assert output_tokens(document) == tokens


def test_stream_errors() -> None:
    assert (
        stream_error({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}) == "Overloaded"
    )
    assert stream_error({"error": {"message": "boom", "code": 500}}) == "boom"
    assert stream_error({"choices": [], "error": None}) is None
    assert stream_error({"type": "response.output_text.delta", "delta": "x"}) is None


def test_decoder_joins_data_lines_names_events_and_keeps_partial_events() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b'event: ping\r\ndata: {"a":\r\ndata:1}\r\n\r\n: comment\n\ndata: [DO') == [
        ("ping", b'{"a":\n1}')
    ]
    assert decoder.inside_event
    assert decoder.feed(b"NE]\n\n") == [("message", b"[DONE]")]
    assert not decoder.inside_event
