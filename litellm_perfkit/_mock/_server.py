"""The mock's standalone server: HTTP/1.1 on asyncio protocols, no framework.

Written for speed, because the mock must never be what limits a benchmark:
it parses only what it needs (request line, Content-Length, Connection),
keeps connections alive, and schedules stream events with loop timers rather
than coroutines. uvloop is used when installed.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import time
from collections.abc import Sequence

from .._stop import Stopped, run_until_stopped
from .._wire._names import MOCK_PROCESSING_HEADER, MOCK_RECEIVED_HEADER
from ._config import Deployment, MockConfig
from ._engine import JSON, MockEngine, Plan, error_body

__all__ = ["serve", "start_servers", "MockProtocol"]

_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    404: b"Not Found",
    405: b"Method Not Allowed",
    413: b"Payload Too Large",
    429: b"Too Many Requests",
    500: b"Internal Server Error",
}
_MAX_HEAD = 64 * 1024
_PROCESSING = MOCK_PROCESSING_HEADER.encode()
_RECEIVED = MOCK_RECEIVED_HEADER.encode()
_MAX_BODY = 64 * 1024 * 1024


class MockProtocol(asyncio.Protocol):
    """One connection. Requests are answered in order (no overlap per connection)."""

    def __init__(self, engine: MockEngine) -> None:
        self.engine = engine
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.busy = False  # a response is in flight
        self.keep_alive = True
        self.timers: list[asyncio.TimerHandle] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next_request()

    def _next_request(self) -> None:
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > _MAX_HEAD:
                self._fail(400, b"request head too large")
            return
        head = buffer[:end].decode("latin-1")
        lines = head.split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self._fail(400, b"malformed request line")
            return
        length = 0
        keep_alive = version == "HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                try:
                    length = int(value)
                except ValueError:
                    self._fail(400, b"bad content-length")
                    return
            elif name == "connection":
                token = value.strip().lower()
                keep_alive = token != "close" and (keep_alive or token == "keep-alive")
            elif name == "transfer-encoding" and "chunked" in value.lower():
                self._fail(400, b"chunked request bodies are not supported; send Content-Length")
                return
        if length > _MAX_BODY:
            self._fail(413, b"request body too large")
            return
        body_start = end + 4
        if len(buffer) < body_start + length:
            return  # wait for the rest of the body
        body = buffer[body_start : body_start + length]
        self.buffer = buffer[body_start + length :]
        self.keep_alive = keep_alive
        self.busy = True
        received = time.perf_counter_ns()
        self._execute(self.engine.plan(method, target, body), received)

    def _fail(self, status: int, message: bytes) -> None:
        body = error_body(message.decode(), "invalid_request_error")
        if self.transport is not None:
            self.transport.write(_head(status, JSON, len(body), [], 0, close=True) + body)
            self.transport.close()

    # -- responses ------------------------------------------------------------
    def _execute(self, plan: Plan, received_ns: int) -> None:
        if plan.action == "hang":
            self.timers.append(self.loop.call_later(plan.hang_s, self._close))
            return
        if plan.action == "disconnect" and not plan.streaming:
            self._close()
            return
        if plan.streaming:
            self._stream(plan, received_ns)
        elif plan.at_s > 0:
            self.timers.append(self.loop.call_later(plan.at_s, self._send_body, plan, received_ns))
        else:
            self._send_body(plan, received_ns)

    def _send_body(self, plan: Plan, received_ns: int) -> None:
        transport = self.transport
        if transport is None:
            return
        assert plan.render is not None
        body = plan.render(0)
        # The mock's own time: the deliberate delay is not processing.
        processing = max(0, time.perf_counter_ns() - received_ns - int(plan.at_s * 1e9))
        transport.write(
            _head(
                plan.status,
                plan.content_type,
                len(body),
                plan.headers,
                processing,
                close=not self.keep_alive,
                received_ns=received_ns,
            )
            + body
        )
        self._done()

    def _stream(self, plan: Plan, received_ns: int) -> None:
        assert self.transport is not None and plan.offsets_s is not None
        processing = time.perf_counter_ns() - received_ns
        self.transport.write(
            _head(
                plan.status,
                plan.content_type,
                None,
                plan.headers,
                processing,
                close=not self.keep_alive,
                received_ns=received_ns,
            )
        )
        start = self.loop.time() - (time.perf_counter_ns() - received_ns) / 1e9
        # Events due at the same moment go out together, in order: timers with
        # equal deadlines are not ordered by the event loop.
        groups: list[tuple[float, list[int]]] = []
        for seq, offset in enumerate(plan.offsets_s):
            if groups and groups[-1][0] == offset:
                groups[-1][1].append(seq)
            else:
                groups.append((offset, [seq]))
        # One timer at a time, each set when the group before it has gone
        # out: timers set all at once can fire out of order. uvloop turns
        # call_at into a whole-millisecond delay and re-reads its clock when
        # it starts the timer, so an early group's timer started just after a
        # preemption is due late, after later groups.
        if groups[0][0] > 0:
            self.timers = [self.loop.call_at(start + groups[0][0], self._send_group, plan, start, groups, 0)]
        else:
            self._send_group(plan, start, groups, 0)

    def _send_group(self, plan: Plan, start: float, groups: list[tuple[float, list[int]]], index: int) -> None:
        if not self._send_events(plan, groups[index][1]):
            return
        index += 1
        if index < len(groups):
            self.timers = [self.loop.call_at(start + groups[index][0], self._send_group, plan, start, groups, index)]

    def _send_events(self, plan: Plan, seqs: list[int]) -> bool:
        """Write the events ``seqs``; False once the response has ended."""
        transport = self.transport
        if transport is None:
            return False
        assert plan.render is not None and plan.offsets_s is not None
        out: list[bytes] = []
        for seq in seqs:
            if plan.action == "disconnect" and seq >= plan.disconnect_after:
                transport.write(b"".join(out))
                self._close()
                return False
            data = plan.render(seq)
            out.append(b"%x\r\n%b\r\n" % (len(data), data))
        if seqs[-1] == len(plan.offsets_s) - 1:
            out.append(b"0\r\n\r\n")
            transport.write(b"".join(out))
            self._done()
            return False
        transport.write(b"".join(out))
        return True

    def _done(self) -> None:
        self.timers.clear()
        self.busy = False
        if not self.keep_alive:
            self._close()
        elif self.buffer:
            self._next_request()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _head(
    status: int,
    content_type: bytes,
    length: int | None,
    headers: list[tuple[bytes, bytes]],
    processing_ns: int,
    close: bool,
    received_ns: int = 0,
) -> bytes:
    lines = [b"HTTP/1.1 %d %b" % (status, _REASONS.get(status, b"Unknown")), b"content-type: " + content_type]
    if length is None:
        lines.append(b"transfer-encoding: chunked")
        lines.append(b"cache-control: no-cache")
    else:
        lines.append(b"content-length: %d" % length)
    lines.append(b"%s: %.3f" % (_PROCESSING, processing_ns / 1e6))
    if received_ns:
        lines.append(b"%s: %d" % (_RECEIVED, received_ns))
    if close:
        lines.append(b"connection: close")
    lines.extend(name + b": " + value for name, value in headers)
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def start_servers(config: MockConfig, deployments: Sequence[Deployment] | None = None) -> list[asyncio.Server]:
    """Start one listener per deployment on the running loop (ports 0 = any free port)."""
    loop = asyncio.get_running_loop()
    servers = []
    for deployment in deployments or config.deployments:
        engine = MockEngine(config, deployment)
        server = await loop.create_server(
            functools.partial(MockProtocol, engine), config.host, deployment.port, backlog=4096
        )
        servers.append(server)
    return servers


def serve(config: MockConfig) -> None:
    """Run the mock until interrupted (uvloop when available); a stop signal
    raises ``Stopped`` (Ctrl-C: SIGINT) once the loop has ended."""

    # Its loop takes the signals: a stop raised inside one of uvloop's
    # callbacks is logged and lost.
    async def main() -> None:
        servers = await start_servers(config)
        for server in servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                print(f"perfkit mock listening on http://{host}:{port}", flush=True)
        await asyncio.gather(*(s.serve_forever() for s in servers))

    stopped_by = run_until_stopped(main())
    if stopped_by is not None:
        raise Stopped(signal.Signals[stopped_by])
