"""One request as a load driver sees it, and the reading of its answer.

Both drivers (perfkit's own and the Locust user) hand the response's body
bytes to one ``ResponseReader``, as they arrive and with their arrival time.
So the same answer gives the same measurements and the same error class
whichever driver read it (tests/load/test_exchange.py feeds one table of
malformed streams through both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import orjson

from .._wire._events import DONE, TERMINAL_TYPES, SseDecoder, carries_output, output_tokens, stream_error
from .._wire._names import CONTENT_TYPE_HEADER, EVENT_STREAM_CONTENT_TYPE, JSON_CONTENT_TYPE

__all__ = ["ERROR_MESSAGES", "ErrorClass", "Exchange", "ResponseReader", "http_error"]

ErrorClass = Literal[
    "connection_refused",
    "connect_error",
    "http_429",
    "http_5xx",
    "http_4xx",
    "timeout",
    "disconnect",
    "malformed_sse",
    "malformed_body",
    "stream_error",
    "stream_incomplete",
    "protocol_error",
]

ERROR_MESSAGES: dict[str, str] = {
    "connection_refused": "connection refused: is the server running on that host and port?",
    "connect_error": "could not connect",
    "http_429": "HTTP 429 Too Many Requests: rate limited (quota, or the gateway's limits)",
    "http_5xx": "HTTP 5xx: the server failed",
    "http_4xx": "HTTP 4xx: the server refused the request (model name, body, key?)",
    "timeout": "no complete answer within --timeout",
    "disconnect": "the server closed the connection before the response was complete",
    "malformed_sse": "a stream event was not valid JSON, or the stream ended inside an event",
    "malformed_body": "a JSON answer was not valid JSON",
    "stream_error": "the server reported an error inside the stream",
    "stream_incomplete": "the stream ended without its last event ([DONE], message_stop or response.completed)",
    "protocol_error": "the answer was not valid HTTP/1.1",
}


def http_error(status: int) -> ErrorClass | None:
    """The error class of an HTTP status; None below 400."""
    if status == 429:
        return "http_429"
    if status >= 500:
        return "http_5xx"
    return "http_4xx" if status >= 400 else None


@dataclass
class Exchange:
    """Everything a driver records about one request (perf_counter_ns)."""

    intended_ns: int
    trace_id: str = ""
    model: str = ""
    sent_ns: int = 0
    first_byte_ns: int = 0
    headers_ns: int = 0
    first_token_ns: int = 0
    end_ns: int = 0
    status: int = 0
    error: ErrorClass | None = None
    detail: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    token_times: list[int] = field(default_factory=list)  # arrival of each output event
    events: int = 0  # data events other than [DONE]
    usage_tokens: int | None = None
    # Ground truth from the mock: (mock send mono_ns, client arrival ns) per output event
    stamps: list[tuple[int, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def output_tokens(self) -> tuple[int, str]:
        """(tokens, source): the server's usage when it gave one, else the output event count."""
        if self.usage_tokens is not None:
            return self.usage_tokens, "usage"
        return len(self.token_times), "chunks"

    def fail(self, error: ErrorClass, detail: str) -> None:
        """Record the first error; later ones add nothing."""
        if self.error is None:
            self.error, self.detail = error, detail


def _stamp(document: dict[str, object]) -> int | None:
    stamp = document.get("perfkit")
    if isinstance(stamp, dict) and isinstance(stamp.get("mono_ns"), int):
        return int(stamp["mono_ns"])
    return None


class ResponseReader:
    """Reads one answer's body into its exchange: an SSE stream event by
    event, anything else whole. Call ``feed`` with each piece of the body and
    its arrival time, then ``finish`` when the body has ended."""

    __slots__ = ("exchange", "_decoder", "_body", "_ended")

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        streaming = exchange.headers.get(CONTENT_TYPE_HEADER, "").startswith(EVENT_STREAM_CONTENT_TYPE)
        self._decoder = SseDecoder() if streaming else None
        self._body = bytearray()
        self._ended = False

    def feed(self, data: bytes, now: int) -> None:
        if self._decoder is None:
            self._body += data
            return
        exchange = self.exchange
        for _, payload in self._decoder.feed(data):
            if payload == DONE:
                self._ended = True
                continue
            exchange.events += 1
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                exchange.fail("malformed_sse", f"event {exchange.events}: {payload[:60]!r}")
                continue
            if not isinstance(event, dict):
                continue
            if carries_output(event):
                if not exchange.first_token_ns:
                    exchange.first_token_ns = now
                exchange.token_times.append(now)
                sent = _stamp(event)
                if sent is not None:
                    exchange.stamps.append((sent, now))
            tokens = output_tokens(event)
            if tokens is not None:
                exchange.usage_tokens = tokens
            message = stream_error(event)
            if message is not None:
                exchange.fail("stream_error", message)
            if event.get("type") in TERMINAL_TYPES:
                self._ended = True

    def finish(self, now: int) -> None:
        """The body ended (complete, as HTTP framed it)."""
        exchange = self.exchange
        exchange.end_ns = exchange.end_ns or now
        error = http_error(exchange.status)
        if error is not None:
            exchange.fail(error, bytes(self._body[:200]).decode("utf-8", "replace"))
        if self._decoder is not None:
            if self._decoder.inside_event:
                exchange.fail("malformed_sse", "the stream ended inside an event")
            elif not self._ended:
                exchange.fail("stream_incomplete", f"after {exchange.events} events")
            return
        if not exchange.headers.get(CONTENT_TYPE_HEADER, "").startswith(JSON_CONTENT_TYPE) or not self._body:
            return
        try:
            document = orjson.loads(self._body)
        except orjson.JSONDecodeError:
            exchange.fail("malformed_body", bytes(self._body[:60]).decode("utf-8", "replace"))
            return
        tokens = output_tokens(document)
        if tokens is not None:
            exchange.usage_tokens = tokens
        if exchange.error is None and isinstance(document, dict):
            exchange.first_token_ns = exchange.end_ns  # the whole answer arrives at once
            sent = _stamp(document)
            if sent is not None:
                exchange.stamps.append((sent, exchange.end_ns))
