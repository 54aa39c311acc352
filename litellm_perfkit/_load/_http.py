"""The load driver's HTTP/1.1 client: one keep-alive connection, one request at a time.

Hand-written on asyncio protocols for speed (the driver must not be what
limits a run) and for timing: every ``data_received`` is stamped with
``perf_counter_ns`` once, and each SSE event decoded from it gets that time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any, Literal

import orjson

from .._core._sse import has_content_delta

__all__ = ["Exchange", "Connection", "ErrorClass", "connect", "completion_tokens", "http_error", "CAPTURED_HEADERS"]

ErrorClass = Literal[
    "connection_refused", "connect_error", "http_429", "http_5xx", "http_4xx", "timeout",
    "disconnect", "malformed_sse", "protocol_error",
]  # fmt: skip

ERROR_MESSAGES: dict[str, str] = {
    "connection_refused": "connection refused: is the server running on that host and port?",
    "connect_error": "could not connect",
    "http_429": "HTTP 429 Too Many Requests: rate limited (quota, or the gateway's limits)",
    "http_5xx": "HTTP 5xx: the server failed",
    "http_4xx": "HTTP 4xx: the server refused the request (model name, body, key?)",
    "timeout": "no complete answer within --timeout",
    "disconnect": "the server closed the connection before the response was complete",
    "malformed_sse": "a stream event was not valid JSON (or the stream framing was broken)",
    "protocol_error": "the answer was not valid HTTP/1.1",
}

def http_error(status: int) -> ErrorClass | None:
    """The error class of an HTTP status; None below 400."""
    if status == 429:
        return "http_429"
    if status >= 500:
        return "http_5xx"
    return "http_4xx" if status >= 400 else None


def completion_tokens(document: Any) -> int | None:
    """``usage.completion_tokens`` of a response body or stream event, if it has one."""
    usage = document.get("usage") if isinstance(document, dict) else None
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return int(usage["completion_tokens"])
    return None


# Response headers the driver keeps (names lowercased).
CAPTURED_HEADERS = (
    "x-litellm-overhead-duration-ms",
    "x-perfkit-overhead-ms",
    "server-timing",
    "x-perfkit-mock-received-ns",
    "x-perfkit-mock-processing-ms",
    "content-type",
    "retry-after",
)


@dataclass
class Exchange:
    """Everything the driver records about one request (perf_counter_ns)."""

    intended_ns: int
    trace_id: str = ""
    model: str = ""
    sent_ns: int = 0
    first_byte_ns: int = 0
    headers_ns: int = 0
    first_token_ns: int = 0
    end_ns: int = 0
    status: int = 0
    error: str | None = None
    detail: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    token_times: list[int] = field(default_factory=list)  # arrival of each content event
    events: int = 0  # SSE data events other than [DONE]
    usage_tokens: int | None = None
    # Ground truth from the mock: (mock send mono_ns, client arrival ns) per content event
    stamps: list[tuple[int, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def output_tokens(self) -> tuple[int, str]:
        """(tokens, source): the server's usage when it gave one, else the content event count."""
        if self.usage_tokens is not None:
            return self.usage_tokens, "usage"
        return len(self.token_times), "chunks"


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.done: asyncio.Future[None] | None = None
        self.closed = False
        self.reusable = False
        self._reset()

    def _reset(self) -> None:
        self._buffer = b""
        self._state = "head"
        self._chunked = False
        self._remaining = -1  # content-length left, -1: until close
        self._chunk_left = 0
        self._crlf_due = False
        self._sse = False
        self._sse_buffer = b""
        self._body = bytearray()
        self._close_after = False

    # -- protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self.exchange is not None and self.done is not None and not self.done.done():
            if self._state == "body" and self._remaining < 0 and not self._chunked:
                self._finish(perf_counter_ns())  # body delimited by close
            else:
                self._fail("disconnect", "connection closed mid-stream" if self._state == "body" else "connection closed before the response")

    def data_received(self, data: bytes) -> None:
        now = perf_counter_ns()
        exchange = self.exchange
        if exchange is None or self.done is None or self.done.done():
            return
        if not exchange.first_byte_ns:
            exchange.first_byte_ns = now
        try:
            if self._state == "head":
                self._buffer += data
                end = self._buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                head, data = self._buffer[:end], self._buffer[end + 4 :]
                self._buffer = b""
                self._parse_head(head, now)
                self._state = "body"
            if self._state == "body" and data:
                self._body_data(data, now)
            elif self._state == "body" and self._remaining == 0:
                self._finish(now)
        except _Malformed as exc:
            self._fail("protocol_error", str(exc))
            self._abort()

    # -- parsing ----------------------------------------------------------------
    def _parse_head(self, head: bytes, now: int) -> None:
        exchange = self.exchange
        assert exchange is not None
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise _Malformed(f"bad status line {lines[0][:80]!r}")
        exchange.status = int(parts[1])
        exchange.headers_ns = now
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            key = name.strip().lower().decode("latin-1")
            text = value.strip().decode("latin-1")
            if key == "content-length":
                self._remaining = int(text)
            elif key == "transfer-encoding" and "chunked" in text.lower():
                self._chunked = True
            elif key == "connection" and text.lower() == "close":
                self._close_after = True
            if key in CAPTURED_HEADERS:
                exchange.headers[key] = text
        self._sse = exchange.headers.get("content-type", "").startswith("text/event-stream")
        if self._chunked:
            self._remaining = -1

    def _body_data(self, data: bytes, now: int) -> None:
        if not self._chunked:
            if self._remaining >= 0:
                data = data[: self._remaining]
                self._remaining -= len(data)
            self._payload(data, now)
            if self._remaining == 0:
                self._finish(now)
            return
        buffer = self._buffer + data
        position = 0
        while True:
            if self._chunk_left > 0:
                take = buffer[position : position + self._chunk_left]
                self._payload(take, now)
                self._chunk_left -= len(take)
                position += len(take)
                if self._chunk_left > 0:
                    break
            if self._crlf_due:  # the CRLF that ends each chunk's data
                if len(buffer) - position < 2:
                    break
                position += 2
                self._crlf_due = False
            line_end = buffer.find(b"\r\n", position)
            if line_end < 0:
                break
            size_text = buffer[position:line_end].split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _Malformed(f"bad chunk size {size_text[:20]!r}") from None
            position = line_end + 2
            if size == 0:
                self._buffer = b""
                self._finish(now)
                return
            self._chunk_left = size
            self._crlf_due = True
        self._buffer = buffer[position:]

    def _payload(self, data: bytes, now: int) -> None:
        if not self._sse:
            self._body += data
            return
        exchange = self.exchange
        assert exchange is not None
        pending = (self._sse_buffer + data).replace(b"\r\n", b"\n")
        *events, self._sse_buffer = pending.split(b"\n\n")
        for raw in events:
            payload = b"\n".join(line[5:].lstrip() for line in raw.split(b"\n") if line.startswith(b"data:"))
            if not payload or payload == b"[DONE]":
                continue
            exchange.events += 1
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                if exchange.error is None:
                    exchange.error, exchange.detail = "malformed_sse", f"event {exchange.events}: {payload[:60]!r}"
                continue
            if not isinstance(event, dict):
                continue
            if has_content_delta(event):
                if not exchange.first_token_ns:
                    exchange.first_token_ns = now
                exchange.token_times.append(now)
                stamp = event.get("perfkit")
                if isinstance(stamp, dict) and isinstance(stamp.get("mono_ns"), int):
                    exchange.stamps.append((stamp["mono_ns"], now))
            tokens = completion_tokens(event)
            if tokens is not None:
                exchange.usage_tokens = tokens

    # -- outcome ------------------------------------------------------------------
    def _finish(self, now: int) -> None:
        exchange = self.exchange
        assert exchange is not None and self.done is not None
        exchange.end_ns = now
        if not self._sse and self._body:
            self._read_json_body(exchange)
        if exchange.error is None:
            exchange.error = http_error(exchange.status)
            if exchange.error:
                exchange.detail = bytes(self._body[:200]).decode("utf-8", "replace")
        self.reusable = not self._close_after and not self.closed
        self._reset()
        self.done.set_result(None)

    def _read_json_body(self, exchange: Exchange) -> None:
        try:
            body = orjson.loads(self._body)
        except orjson.JSONDecodeError:
            return
        if not isinstance(body, dict):
            return
        tokens = completion_tokens(body)
        if tokens is not None:
            exchange.usage_tokens = tokens
        if exchange.status < 400:
            exchange.first_token_ns = exchange.end_ns  # the whole answer arrives at once
            stamp = body.get("perfkit")
            if isinstance(stamp, dict) and isinstance(stamp.get("mono_ns"), int):
                exchange.stamps.append((stamp["mono_ns"], exchange.end_ns))

    def _fail(self, error: str, detail: str) -> None:
        exchange = self.exchange
        if exchange is None or self.done is None or self.done.done():
            return
        exchange.end_ns = perf_counter_ns()
        exchange.error = exchange.error if exchange.error == "malformed_sse" else error
        exchange.detail = exchange.detail or detail
        self.reusable = False
        self.done.set_result(None)

    def _abort(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    async def send(self, request: bytes, exchange: Exchange, timeout_s: float) -> None:
        """Send one request and wait for its complete answer (or an error)."""
        assert self.transport is not None
        self.exchange = exchange
        self.done = asyncio.get_running_loop().create_future()
        self.reusable = False
        exchange.sent_ns = perf_counter_ns()
        self.transport.write(request)
        try:
            await asyncio.wait_for(asyncio.shield(self.done), timeout_s)
        except asyncio.TimeoutError:
            self._fail("timeout", f"no complete answer in {timeout_s:g} s")
            self._abort()
        finally:
            self.exchange = None


class _Malformed(Exception):
    pass


async def connect(host: str, port: int, timeout_s: float) -> Connection:
    loop = asyncio.get_running_loop()
    _, protocol = await asyncio.wait_for(loop.create_connection(Connection, host, port), timeout_s)
    return protocol
