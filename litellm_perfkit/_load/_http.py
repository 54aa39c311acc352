"""The load driver's HTTP/1.1 client: one keep-alive connection, one request at a time.

Hand-written on asyncio protocols for speed (the driver must not be what
limits a run) and for timing: every ``data_received`` is stamped with
``perf_counter_ns`` once, and each SSE event decoded from it gets that time.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

from .._wire._names import CAPTURED_HEADERS
from ._exchange import ErrorClass, Exchange, ResponseReader

__all__ = ["Connection", "connect"]


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
        self._reader: ResponseReader | None = None
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
                self._fail(
                    "disconnect",
                    "connection closed mid-stream"
                    if self._state == "body"
                    else "connection closed before the response",
                )

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
        self._reader = ResponseReader(exchange)
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
        assert self._reader is not None
        self._reader.feed(data, now)

    # -- outcome ------------------------------------------------------------------
    def _finish(self, now: int) -> None:
        assert self.exchange is not None and self.done is not None and self._reader is not None
        self._reader.finish(now)
        self.reusable = not self._close_after and not self.closed
        self._reset()
        self.done.set_result(None)

    def _fail(self, error: ErrorClass, detail: str) -> None:
        exchange = self.exchange
        if exchange is None or self.done is None or self.done.done():
            return
        exchange.end_ns = perf_counter_ns()
        exchange.fail(error, detail)
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
