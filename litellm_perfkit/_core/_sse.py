"""Server-sent-event scanning for the middleware: TTFT, chunk count, end of stream.

Before the first content token the scanner parses events (it must look inside
them: a role-only chunk is not a token). After it, it only counts event
starts with ``bytes.count``; the middleware then feeds it several body
messages joined at once, so a long stream costs almost nothing per chunk.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["SseScanner", "data_has_token", "has_content_delta"]

_EVENT = b"\ndata:"
_DONE = (b"\ndata: [DONE]", b"\ndata:[DONE]")
# Longest pattern minus one: a pattern split across two body messages is seen
# exactly once in tail + body, and never inside the tail alone.
_TAIL = max(len(p) for p in (_EVENT, *_DONE)) - 1
# A cheap pre-filter: an event without any of these cannot carry a token.
_TOKEN_HINTS = (b'"content"', b'"tool_calls"', b'"reasoning', b'"text"', b'"function_call"')


def has_content_delta(event: Any) -> bool:
    """True when an OpenAI-style stream event carries output: non-empty content,
    tool-call, function-call or reasoning delta (chat), or non-empty text (completions).
    A role-only chunk, an empty content string and a usage-only chunk do not count."""
    if not isinstance(event, dict):
        return False
    choices = event.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and (
            delta.get("content")
            or delta.get("tool_calls")
            or delta.get("function_call")
            or delta.get("reasoning_content")
            or delta.get("reasoning")
        ):
            return True
    return False


def data_has_token(data: bytes) -> bool:
    """Whether one event's data (JSON) carries output. Both scanners ask this
    (the C one too), so what counts as the first token is defined once."""
    try:
        return has_content_delta(orjson.loads(data))
    except orjson.JSONDecodeError:
        return False


class SseScanner:
    """Feed it each response body message in order."""

    __slots__ = ("events", "done_events", "token_seen", "_pending", "_tail")

    def __init__(self) -> None:
        self.events = 0
        self.done_events = 0
        self.token_seen = False
        self._pending = b""
        self._tail = b"\n"  # the first event of a stream has no newline before it

    @property
    def chunks(self) -> int:
        """Data events other than the ``[DONE]`` sentinel."""
        return self.events - self.done_events

    def feed(self, body: bytes) -> bool:
        """Count events in ``body``; True if it holds the first content token."""
        tail = self._tail
        if tail == b"\n":
            # The common case: the previous message ended a line, so patterns
            # (which all start with a newline) cannot straddle the boundary.
            self.events += body.count(_EVENT) + body.startswith(b"data:")
            if body.find(b"[DONE]") >= 0:  # find: cheaper than ``in`` on bytes (timeit, CPython 3.11)
                window = tail + body
                self.done_events += window.count(_DONE[0]) + window.count(_DONE[1])
        else:
            window = tail + body
            self.events += window.count(_EVENT) - tail.count(_EVENT)
            for done in _DONE:
                self.done_events += window.count(done) - tail.count(done)
        self._tail = b"\n" if body.endswith(b"\n") else (tail + body)[-_TAIL:]
        if self.token_seen:
            return False
        if self._find_token(body):
            self.token_seen = True
            self._pending = b""
            return True
        return False

    def _find_token(self, body: bytes) -> bool:
        pending = (self._pending + body).replace(b"\r\n", b"\n")
        *complete, self._pending = pending.split(b"\n\n")
        for raw_event in complete:
            if not _may_carry_token(raw_event):
                continue
            if raw_event.startswith(b"data:") and raw_event.find(b"\n") < 0:
                data = raw_event[5:]  # one data line, the usual event; orjson skips the space
            else:
                data = b"\n".join(
                    line[5:].lstrip(b" ") for line in raw_event.split(b"\n") if line.startswith(b"data:")
                )
            if data_has_token(data):
                return True
        return False


def _may_carry_token(event: bytes) -> bool:
    # bytes.find, not ``in``: the faster of the two on CPython 3.11 (timeit).
    for hint in _TOKEN_HINTS:
        if event.find(hint) >= 0:
            return True
    return False
