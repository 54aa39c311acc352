"""Model APIs' stream events: which carry output, usage, errors, the end.

One definition for every reader: the middleware's scanner (server-side
TTFT), the load driver and the Locust user (client-side TTFT), and the mock
(which writes these formats). The formats:

- OpenAI Chat Completions and Completions: chunks with ``choices[].delta``
  (content, tool calls, reasoning) or ``choices[].text``; the stream ends
  with ``data: [DONE]``.
- Anthropic Messages: ``content_block_delta`` events with a text, JSON or
  thinking delta; the stream ends with ``message_stop``.
- OpenAI Responses: ``response.*.delta`` events with a non-empty delta; the
  stream ends with ``response.completed`` (or ``.failed``/``.incomplete``).
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = [
    "CHAT_OUTPUT_KEYS",
    "DONE",
    "TERMINAL_TYPES",
    "TOKEN_HINTS",
    "SseDecoder",
    "carries_output",
    "data_has_token",
    "output_tokens",
    "stream_error",
]

DONE = b"[DONE]"
"""The data of the OpenAI streams' last event."""
TERMINAL_TYPES = frozenset({"message_stop", "response.completed", "response.failed", "response.incomplete"})
"""Event types that end an Anthropic or Responses stream."""

CHAT_OUTPUT_KEYS = ("content", "tool_calls", "function_call", "reasoning_content", "reasoning")
_ANTHROPIC_OUTPUT = ("text", "partial_json", "thinking")

TOKEN_HINTS = (
    b'"content"',
    b'"tool_calls"',
    b'"reasoning',
    b'"text"',
    b'"function_call"',
    b'"partial_json"',
    b'"thinking"',
    b'.delta"',
)
"""Byte strings one of which every output-carrying event contains (a cheap
filter before parsing; the C scanner gets the same tuple)."""


def carries_output(event: Any) -> bool:
    """True when a stream event (parsed JSON) carries output: a non-empty
    content, tool-call, function-call or reasoning delta (chat), non-empty
    text (completions), a text, JSON or thinking delta (Anthropic), or a
    non-empty ``response.*.delta`` (Responses). A role-only chunk, an empty
    content string and a usage-only chunk do not count."""
    if not isinstance(event, dict):
        return False
    kind = event.get("type")
    if kind == "content_block_delta":
        delta = event.get("delta")
        return isinstance(delta, dict) and any(delta.get(key) for key in _ANTHROPIC_OUTPUT)
    if isinstance(kind, str) and kind.startswith("response.") and kind.endswith(".delta"):
        return bool(event.get("delta"))
    choices = event.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(delta.get(key) for key in CHAT_OUTPUT_KEYS):
            return True
    return False


def data_has_token(data: bytes) -> bool:
    """Whether one event's data (JSON) carries output. The scanners ask this
    (the C one for what its own reader leaves undecided)."""
    try:
        return carries_output(orjson.loads(data))
    except orjson.JSONDecodeError:
        return False


def output_tokens(document: Any) -> int | None:
    """Output tokens a response body or stream event reports: ``usage.completion_tokens``
    (OpenAI), ``usage.output_tokens`` (Anthropic, Responses) or
    ``response.usage.output_tokens`` (the Responses stream's last event)."""
    if not isinstance(document, dict):
        return None
    usage = document.get("usage")
    if not isinstance(usage, dict):
        response = document.get("response")
        usage = response.get("usage") if isinstance(response, dict) else None
    if isinstance(usage, dict):
        for key in ("completion_tokens", "output_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def stream_error(event: Any) -> str | None:
    """The message of an error reported inside a stream (an ``error`` event,
    or an OpenAI-style ``{"error": ...}`` chunk), else None."""
    if not isinstance(event, dict):
        return None
    error = event.get("error")
    if event.get("type") == "error" or (error is not None and "choices" not in event and "type" not in event):
        if isinstance(error, dict):
            return str(error.get("message") or error.get("type") or error)[:200]
        return str(error)[:200]
    return None


class SseDecoder:
    """An incremental ``text/event-stream`` decoder: bytes in, (event, data) out.

    The parts of the WHATWG rules model APIs use: events end at a blank
    line, CRLF counts as LF, ``data:`` lines join with newlines (one space
    after the colon dropped), ``event:`` names the event (default
    ``message``), comments and other fields are skipped.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        text = (self._pending + data).replace(b"\r\n", b"\n")
        *blocks, self._pending = text.split(b"\n\n")
        events = []
        for block in blocks:
            name = "message"
            lines = []
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    value = line[5:]
                    lines.append(value[1:] if value.startswith(b" ") else value)
                elif line.startswith(b"event:"):
                    name = line[6:].strip().decode("utf-8", "replace")
            if lines:
                events.append((name, b"\n".join(lines)))
        return events

    @property
    def inside_event(self) -> bool:
        """Whether bytes of an unfinished event are waiting (a stream cut mid-event)."""
        return bool(self._pending.strip())
