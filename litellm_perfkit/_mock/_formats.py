"""The wire formats the mock answers in: one answer, four ways to write it.

An ``Answer`` is what the mock decided (text, size, finish, usage). Each
format writes it as one JSON body, or as the SSE events of a stream with the
content events at the content offsets and the rest around them. Bodies are
open JSON objects (no closing brace): the engine stamps them at send time.

- ``chat``: OpenAI Chat Completions (also Azure's deployment paths).
- ``completions``: OpenAI legacy Completions.
- ``messages``: Anthropic Messages (``event:`` lines, no ``[DONE]``).
- ``responses``: OpenAI Responses (``response.*`` events, no ``[DONE]``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

__all__ = ["Api", "Answer", "Events", "FORMATS", "ID_MARKER", "open_json"]

Api = Literal["chat", "completions", "messages", "responses"]
ID_MARKER = "\u0000perfkit-id\u0000"  # spliced per request into a cached body


def open_json(obj: dict[str, Any]) -> bytes:
    """A JSON object's bytes without the closing brace, ready to be stamped."""
    return orjson.dumps(obj)[:-1]


@dataclass(frozen=True)
class Answer:
    ident: str
    model: str
    created: int
    first: str  # the first content chunk's text
    rest: str  # every later content chunk's text
    chunks: int
    finish: Literal["stop", "length"]
    prompt_tokens: int
    completion_tokens: int

    @property
    def text(self) -> str:
        return self.first + self.rest * (self.chunks - 1)


@dataclass
class Events:
    """A stream: event ``i`` (an open JSON object with its SSE framing) is
    sent at ``times_s[i]``; ``terminal``, if any, is sent last as it is."""

    prefixes: list[bytes]
    times_s: list[float]
    terminal: bytes | None


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = b"" if event is None else b"event: %b\n" % event.encode()
    return head + b"data: " + open_json(data)


def _layout(
    before: list[bytes], content: list[bytes], after: list[bytes], offsets: list[float]
) -> tuple[list[bytes], list[float]]:
    """Events before the content go at once, content at its offsets, the rest with the last chunk."""
    return [*before, *content, *after], [0.0] * len(before) + offsets + [offsets[-1]] * len(after)


# -- OpenAI Chat Completions and Completions --------------------------------
def _usage_openai(answer: Answer) -> dict[str, int]:
    total = answer.prompt_tokens + answer.completion_tokens
    return {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens, "total_tokens": total}


def _chat_body(answer: Answer) -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": answer.text},
        "finish_reason": answer.finish,
        "logprobs": None,
    }
    return {
        "id": ID_MARKER,
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "choices": [choice],
        "usage": _usage_openai(answer),
        "system_fingerprint": None,
    }


def _completions_body(answer: Answer) -> dict[str, Any]:
    choice = {"index": 0, "text": answer.text, "finish_reason": answer.finish, "logprobs": None}
    return {
        "id": ID_MARKER,
        "object": "text_completion",
        "created": answer.created,
        "model": answer.model,
        "choices": [choice],
        "usage": _usage_openai(answer),
    }


def _openai_stream(chat: bool) -> Callable[[Answer, list[float], dict[str, Any]], Events]:
    def stream(answer: Answer, offsets: list[float], payload: dict[str, Any]) -> Events:
        head = {
            "id": answer.ident,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": answer.created,
            "model": answer.model,
        }

        def event(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> bytes:
            return _sse({**head, "choices": choices, **(extra or {})})

        def content(text: str, finish: str | None) -> list[dict[str, Any]]:
            if chat:
                return [
                    {
                        "index": 0,
                        "delta": {"content": text} if finish is None else {},
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ]
            return [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}]

        before = (
            [
                event(
                    [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None,
                            "logprobs": None,
                        }
                    ]
                )
            ]
            if chat
            else []
        )
        first, rest = event(content(answer.first, None)), event(content(answer.rest, None))
        after = [event(content("", answer.finish))]
        if (payload.get("stream_options") or {}).get("include_usage"):
            after.append(event([], {"usage": _usage_openai(answer)}))
        prefixes, times = _layout(before, [first] + [rest] * (answer.chunks - 1), after, offsets)
        return Events(prefixes, times, b"data: [DONE]\n\n")

    return stream


# -- Anthropic Messages -----------------------------------------------------
_STOP_REASON = {"stop": "end_turn", "length": "max_tokens"}


def _message(answer: Answer, content: list[dict[str, Any]], stop: str | None, output_tokens: int) -> dict[str, Any]:
    return {
        "id": ID_MARKER if stop else answer.ident,
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": output_tokens},
    }


def _messages_body(answer: Answer) -> dict[str, Any]:
    return _message(
        answer, [{"type": "text", "text": answer.text}], _STOP_REASON[answer.finish], answer.completion_tokens
    )


def _messages_stream(answer: Answer, offsets: list[float], payload: dict[str, Any]) -> Events:
    def event(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, **fields}, kind)

    def delta(text: str) -> bytes:
        return event("content_block_delta", index=0, delta={"type": "text_delta", "text": text})

    before = [
        event("message_start", message=_message(answer, [], None, 1)),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    ]
    after = [
        event("content_block_stop", index=0),
        event(
            "message_delta",
            delta={"stop_reason": _STOP_REASON[answer.finish], "stop_sequence": None},
            usage={"output_tokens": answer.completion_tokens},
        ),
        event("message_stop"),
    ]
    first, rest = delta(answer.first), delta(answer.rest)
    prefixes, times = _layout(before, [first] + [rest] * (answer.chunks - 1), after, offsets)
    return Events(prefixes, times, None)


# -- OpenAI Responses -------------------------------------------------------
def _response(answer: Answer, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    done = status == "completed"
    usage = {
        "input_tokens": answer.prompt_tokens,
        "output_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    return {
        "id": ID_MARKER if done else answer.ident,
        "object": "response",
        "created_at": answer.created,
        "status": status,
        "model": answer.model,
        "output": output,
        "usage": usage if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
    }


def _output_item(answer: Answer, status: str, text: str | None) -> dict[str, Any]:
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": f"msg_{answer.ident}", "status": status, "role": "assistant", "content": content}


def _responses_body(answer: Answer) -> dict[str, Any]:
    return _response(answer, "completed", [_output_item(answer, "completed", answer.text)])


def _responses_stream(answer: Answer, offsets: list[float], payload: dict[str, Any]) -> Events:
    item_id = f"msg_{answer.ident}"
    sequence = iter(range(1 << 30))

    def event(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, **fields, "sequence_number": next(sequence)}, kind)

    def part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": []}

    at = {"item_id": item_id, "output_index": 0, "content_index": 0}
    full = {**_response(answer, "completed", [_output_item(answer, "completed", answer.text)]), "id": answer.ident}
    before = [
        event("response.created", response=_response(answer, "in_progress", [])),
        event("response.in_progress", response=_response(answer, "in_progress", [])),
        event("response.output_item.added", output_index=0, item=_output_item(answer, "in_progress", None)),
        event("response.content_part.added", **at, part=part("")),
    ]
    content = [
        event("response.output_text.delta", **at, delta=answer.first if i == 0 else answer.rest, logprobs=[])
        for i in range(answer.chunks)
    ]
    after = [
        event("response.output_text.done", **at, text=answer.text, logprobs=[]),
        event("response.content_part.done", **at, part=part(answer.text)),
        event("response.output_item.done", output_index=0, item=_output_item(answer, "completed", answer.text)),
        event("response.completed", response=full),
    ]
    prefixes, times = _layout(before, content, after, offsets)
    return Events(prefixes, times, None)


@dataclass(frozen=True)
class Format:
    body: Callable[[Answer], dict[str, Any]]  # the whole answer, its id ID_MARKER
    stream: Callable[[Answer, list[float], dict[str, Any]], Events]
    id_prefix: str


FORMATS: dict[Api, Format] = {
    "chat": Format(_chat_body, _openai_stream(chat=True), "chatcmpl-mock"),
    "completions": Format(_completions_body, _openai_stream(chat=False), "cmpl-mock"),
    "messages": Format(_messages_body, _messages_stream, "msg_mock"),
    "responses": Format(_responses_body, _responses_stream, "resp_mock"),
}
