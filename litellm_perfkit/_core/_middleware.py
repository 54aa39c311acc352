"""PerfkitMiddleware: pure ASGI, records one timeline per HTTP request."""

from __future__ import annotations

import hmac
import os
from asyncio.events import _get_running_loop  # None outside asyncio (trio, a test stepping by hand)
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import Token
from time import perf_counter_ns
from typing import Any

from .._wire._environment_variables import PERFKIT_HEADER_SECRET
from .._wire._headers import ENTRY_PREFIXES, THOUSANDTHS, entry_prefix, format_ms, server_timing_entry
from .._wire._names import (
    HEADER_SECRET_HEADER,
    OVERHEAD_HEADER,
    SERVER_TIMING_HEADER,
    TRACEPARENT_HEADER,
    UPSTREAM_STAGE,
    SemConv,
)
from ..types import ASGIApp, AttributeValue, HeaderMode, Message, Receive, RecordRate, Scope, Send, StepMode
from . import _sink
from ._collector import closed_by_collector
from ._context import reset_timeline, set_timeline
from ._fields import GeneratorEntry
from ._gcwatch import WATCH as _GC
from ._gcwatch import install as watch_gc
from ._guard import internal_error
from ._hosttrace import HOST_TRACING
from ._lifespan import calling_at_shutdown
from ._protocol import adopt as _adopt_protocol_work
from ._sampling import (
    RecordChoice,
    pace_for,
    record_rate_from_env,
    record_ratio_from_env,
    sampled_parent,
    scan_headers,
    traced_rate_from_env,
)
from ._sse import SseScanner, is_event_stream
from ._steps import PYTHON_STEPS, StepAccounting, steps_mode
from ._timeline import Timeline
from ._traffic import Tally, tally_recorded

__all__ = ["PerfkitMiddleware", "OVERHEAD_HEADER"]

# Body messages of a stream counted together; bounds what a stream holds.
_BATCH = 16
_OVERHEAD_HEADER = OVERHEAD_HEADER.encode()
_SECRET_HEADER = HEADER_SECRET_HEADER.encode()
_SERVER_TIMING_HEADER = SERVER_TIMING_HEADER.encode()
_TRACEPARENT_HEADER = TRACEPARENT_HEADER.encode()


class _HeaderSettings:
    """What the exchange reads per response: which headers to add, which stages wait upstream."""

    __slots__ = ("server_timing", "overhead_header", "upstream_stages", "_upstream_names")

    def __init__(self, server_timing: bool, overhead_header: bool, upstream_stages: frozenset[str]) -> None:
        self.server_timing = server_timing
        self.overhead_header = overhead_header
        self.upstream_stages = upstream_stages
        self._upstream_names = tuple(sorted(upstream_stages))  # what the timeline keeps


class PerfkitMiddleware:
    """Wrap an ASGI app; websocket scopes pass through untouched, and the
    lifespan's shutdown flushes the export (uvicorn ends the process by
    re-raising SIGTERM, so ``atexit`` would not run).

    ``server_timing``: add ``Server-Timing`` with the stages finished before the
    headers go out. ``overhead_header``: add ``x-perfkit-overhead-ms``, the time
    from request received to headers sent minus the stages named in
    ``upstream_stages`` (see docs/headers.md, also for streams). Both are sent
    to ``trusted`` requests by default: from loopback, or carrying
    ``header_secret`` (default ``$PERFKIT_HEADER_SECRET``) in ``x-perfkit-secret``,
    which the app never sees. ``steps``: split each request's time
    and each stage's into CPU, event-loop queueing and I/O wait (``_steps``;
    default ``$PERFKIT_STEPS``, else on; ``cpu``: each step's CPU from the
    thread's CPU clock). ``record_ratio``: the share of
    requests recorded at all, drawn at random when each starts (default
    ``$PERFKIT_RECORD_RATIO``, else 1); ``record_rate``: about this many
    recorded per second, drawn at random, at most two seconds' worth at once
    (default ``$PERFKIT_RECORD_RATE``, else 10; ``"all"``: no cap). The others pass through and are only counted (``_traffic``:
    method, route, status, error type, duration, TTFT), so perfkit's cost per
    request falls in proportion; the request metrics cover every request, and
    spans, stage metrics and headers the recorded sample, each recorded
    request carrying the number it stands for (``RequestRecord.weight``).
    Recorded whatever the ratio and rate, with weight 1: a request carrying
    the secret, and one whose ``traceparent`` is sampled (at most
    ``record_traced_rate`` a second, default ``$PERFKIT_RECORD_TRACED_RATE``,
    else ``"all"``). ``x-perfkit-secret`` is removed from every request the
    app gets, recorded or not (``_sampling``).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        server_timing: HeaderMode = "trusted",
        overhead_header: HeaderMode = "trusted",
        upstream_stages: Iterable[str] = (UPSTREAM_STAGE,),
        attributes: Callable[[], Mapping[str, AttributeValue]] | None = None,
        header_secret: str | None = None,
        steps: StepMode | None = None,
        record_ratio: float | None = None,
        record_rate: RecordRate | None = None,
        record_traced_rate: RecordRate | None = None,
    ) -> None:
        self.app = app
        # What every request reads, as instance attributes: CPython 3.11 reads
        # those without a class lookup (about 100 instructions each a request).
        # The backend's subclass sets them on the class (_backend).
        cls = type(self)
        self._scan_headers = cls._scan_headers
        if hasattr(cls, "_tally"):
            self._tally = cls._tally
        mode = steps or steps_mode()
        self._clock_steps = mode != "off"
        self._thread_cpu = mode == "cpu"
        choice = RecordChoice(
            max(0.0, record_ratio_from_env() if record_ratio is None else record_ratio),
            record_rate_from_env() if record_rate is None else record_rate,
        )
        # None: every request is recorded (no choice on the hot path).
        self._record_choice = None if choice.every_request else choice
        # Requests with a sampled traceparent, recorded beyond the choice: at most this pace (None: all).
        self._traced_pace = pace_for(traced_rate_from_env() if record_traced_rate is None else record_traced_rate)
        stages = frozenset(upstream_stages)
        # The settings for a trusted request, and for any other.
        self._loud = _HeaderSettings(server_timing != "off", overhead_header != "off", stages)
        self._quiet = _HeaderSettings(server_timing == "on", overhead_header == "on", stages)
        # Only "trusted" asks who the client is.
        self._check = (self._loud.server_timing, self._loud.overhead_header) != (
            self._quiet.server_timing,
            self._quiet.overhead_header,
        )
        secret = os.environ.get(PERFKIT_HEADER_SECRET) if header_secret is None else header_secret
        self._secret = secret.encode() if secret else None
        # Called once per request; its (ideally cached) mapping goes on the span.
        self.attributes = attributes
        watch_gc()

    @property
    def upstream_stages(self) -> frozenset[str]:
        return self._loud.upstream_stages

    def _settings_for(self, scope: Scope) -> tuple[int, _HeaderSettings | None, Scope]:
        """For a request carrying the secret's header or a sampled-looking
        ``traceparent`` (``scan_headers`` found one): its weight (0: not
        recorded), the header settings the secret decides (None: its address
        does), and the scope the app gets, without the secret's header."""
        secret_held = None  # None: no secret header; else whether one carried the configured secret
        traced = False
        headers = scope["headers"]
        for name, value in headers:
            if name == _SECRET_HEADER:
                secret = self._secret
                held = secret is not None and hmac.compare_digest(value, secret)
                secret_held = held or bool(secret_held)
            elif name == _TRACEPARENT_HEADER:
                traced = sampled_parent(value)
        if secret_held is not None:
            scope = {**scope, "headers": [header for header in headers if header[0] != _SECRET_HEADER]}
        if secret_held or (traced and (self._traced_pace is None or self._traced_pace.allows())):
            weight = 1  # recorded always, taking nothing from the record choice's pace or count
        else:
            weight = 1 if self._record_choice is None else self._record_choice.record()
        if secret_held is None or not self._check:
            return weight, None, scope
        return weight, (self._loud if secret_held else self._quiet), scope

    def _settings_by_address(self, scope: Scope) -> _HeaderSettings:
        """A trusted request's settings (loopback, in mode ``trusted``) or the others'."""
        if not self._check:
            return self._loud
        client = scope.get("client")
        if client and (client[0].startswith("127.") or client[0] == "::1"):
            return self._loud
        return self._quiet

    # The backend's classes (``_backend``): the public PerfkitMiddleware is
    # the running backend's subclass, which sets them.
    _timeline_class: type[Timeline]
    _exchange_class: type[_PyExchange]
    _step_accounting: StepAccounting = PYTHON_STEPS
    _scan_headers: Callable[[Any], int] = staticmethod(scan_headers)
    _tally: Tally  # every request, recorded or not (_traffic)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(
                scope, receive, calling_at_shutdown(send, _sink.at_shutdown) if scope["type"] == "lifespan" else send
            )
            return
        try:
            scan = self._scan_headers
            if scan(scope["headers"]):  # the secret's header or a sampled parent: a few requests
                weight, settings, scope = self._settings_for(scope)
            else:
                weight, settings = (1 if self._record_choice is None else self._record_choice.record()), None
        except Exception as exc:
            internal_error("middleware.headers", exc)
            weight, settings, scope = 0, self._quiet, _without_secret(scope)
        if not weight:
            # Unrecorded: only counted, through a send that reads the response start.
            try:
                passage = self._tally.passage(scope["method"], send)
                # The app gets the passage's bound send: CPython calls a C
                # one-argument method straight from the app's bytecode, about
                # 117 instructions a message fewer on 3.11 than the passage.
                passed = passage.send
            except Exception as exc:  # perfkit's bug must never become the app's: uncounted, served
                internal_error("middleware.tally", exc)
                await self.app(scope, receive, send)
                return
            try:
                await self.app(scope, receive, passed)
            except BaseException as exc:
                if not closed_by_collector(type(exc)):
                    passage.close(scope, type(exc).__name__)
                raise
            passage.close(scope, None)
            return
        start_ns = perf_counter_ns()  # kept: reading it back from a C timeline would make an int
        timeline = self._timeline_class(start_ns, scope["method"], scope["path"])
        if weight > 1:
            timeline.passed_by = weight - 1
        _adopt_protocol_work(timeline)
        if settings is None:
            try:
                settings = self._settings_by_address(scope)
            except Exception as exc:
                internal_error("middleware.headers", exc)
                settings = self._quiet
        exchange = self._exchange_class(settings, scope, timeline, receive, send)
        if self.attributes is not None:
            try:
                timeline.attributes.update(self.attributes())
            except Exception as exc:
                internal_error("middleware.attributes", exc)
        host = None
        if HOST_TRACING.active or (start_ns >= HOST_TRACING.next_check_ns and HOST_TRACING.refresh(start_ns)):
            host = HOST_TRACING.begin(timeline, scope["headers"])
        call = self.app(scope, exchange.receive, exchange.send)
        if self._clock_steps:
            loop = _get_running_loop()
            if loop is not None:
                try:
                    call = self._step_accounting.clock(call, timeline.steps, loop, self._thread_cpu)
                except Exception as exc:  # the request runs unclocked
                    internal_error("middleware.steps", exc)
        token: Token[Timeline | None] | None = set_timeline(timeline)
        try:
            await call
        except BaseException as exc:
            if closed_by_collector(type(exc)):
                token = None  # an abandoned request being collected: touch nothing (see _collector)
            timeline.error = type(exc).__name__
            raise
        finally:
            if token is not None:
                reset_timeline(token)
                if host is not None:
                    HOST_TRACING.end(host)
                try:
                    _describe(timeline.attributes, scope)
                except Exception as exc:
                    internal_error("middleware.describe", exc)
                exchange.finish()
                tally_recorded(self._tally, timeline, scope)


def _without_secret(scope: Scope) -> Scope:
    """The scope without the secret's header, on the careful path (the quick
    one failed on these headers); unchanged when they cannot be read at all."""
    try:
        headers = scope["headers"]
        kept = [header for header in headers if header[0] != _SECRET_HEADER]
    except Exception:
        return scope
    return {**scope, "headers": kept} if len(kept) != len(headers) else scope


def _describe(attributes: dict[str, AttributeValue], scope: Scope) -> None:
    """The request's semantic-convention attributes the scope holds once the
    app has run: the matched route's template (the router sets
    ``scope["route"]``), the scheme, and the address the server listens on."""
    route = getattr(scope.get("route"), "path", None)
    if route:
        attributes[SemConv.HTTP_ROUTE] = route
    attributes[SemConv.URL_SCHEME] = scope.get("scheme", "http")
    server = scope.get("server")
    if server:
        attributes[SemConv.SERVER_ADDRESS] = server[0]
        if server[1] is not None:
            attributes[SemConv.SERVER_PORT] = server[1]


class _PyExchange:
    """The send/receive wrappers and the per-response state of one request,
    in Python: the reference for the C accelerator's ``Exchange`` (``_backend``
    gives either one Python's ``receive``)."""

    __slots__ = ("_middleware", "_timeline", "_receive", "_send", "_scanner", "_batch", "_complete", "_disconnected")

    def __init__(
        self, middleware: _HeaderSettings, scope: Scope, timeline: Timeline, receive: Receive, send: Send
    ) -> None:
        # The request's side of the timeline: which stages wait upstream, the
        # collector's pause total at the start (finish() makes it the
        # difference) and the caller's traceparent.
        timeline.upstream_stages = middleware._upstream_names
        timeline.gc_pause_ns = _GC.total_ns
        try:
            for name, value in scope["headers"]:
                if name == _TRACEPARENT_HEADER:
                    timeline.traceparent = value.decode("latin-1")
                    break
        except Exception as exc:
            internal_error("middleware.start", exc)
        self._middleware = middleware
        self._timeline = timeline
        self._receive = receive
        self._send = send
        self._scanner: SseScanner | None = None
        # A stream's body messages since the last count; None before its first token.
        self._batch: list[bytes] | None = None
        self._complete = False
        self._disconnected = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._disconnected = True
        return message

    def send(self, message: Message) -> Awaitable[None]:
        # A plain function returning the server's awaitable: no extra coroutine
        # frame per body message. Once a stream's first token is found, its
        # body messages are only held in a short batch and counted together
        # (_count_batch): one join and one scan per _BATCH messages cost less
        # than scanning each one (docs/overhead.md). The batch holds at most
        # _BATCH bodies the app already made, and is counted before any other
        # message of the response is looked at.
        try:
            batch = self._batch
            # Only body messages carry a true more_body (ASGI HTTP; zero-copy
            # sends have no body and add b""), so the type need not be read.
            if batch is not None and message.get("more_body", False):
                batch.append(message.get("body", b""))
                if len(batch) == _BATCH:
                    self._count_batch()
            elif message["type"] == "http.response.body":
                if batch:
                    self._count_batch()
                body = message.get("body", b"")
                if body:
                    self._on_body(body)
                if not message.get("more_body", False):
                    self._timeline.marks["last_byte"] = perf_counter_ns()
                    self._complete = True
            elif message["type"] == "http.response.start":
                message = self._on_start(message)
        except Exception as exc:  # perfkit's bug must never become the app's
            internal_error("middleware.send", exc)
        return self._send(message)

    def _count_batch(self) -> None:
        batch = self._batch
        assert batch is not None and self._scanner is not None
        body = b"".join(batch)
        batch.clear()
        self._timeline.body_bytes += len(body)
        self._scanner.feed(body)

    def _on_start(self, message: Message) -> Message:
        now = perf_counter_ns()
        timeline = self._timeline
        timeline.marks["headers_sent"] = now
        timeline.status = int(message["status"])
        headers = message.get("headers", [])
        if is_event_stream(headers):
            timeline.streaming = True
            self._scanner = SseScanner()
        middleware = self._middleware
        if not (middleware.server_timing or middleware.overhead_header):
            return message
        # One pass over the stages: Server-Timing entries and upstream
        # time. The entry format is server_timing_entry's, inlined (one call
        # less per stage), as an f-string over local names: the cheapest form
        # measured (timeit, CPython 3.11).
        upstream_names = middleware.upstream_stages
        prefixes, thousandths = ENTRY_PREFIXES, THOUSANDTHS
        upstream = 0
        parts = []
        for _, name, start, end, _ in timeline.finished:
            duration = end - start
            if name in upstream_names:
                upstream += duration
            us = (duration + 500) // 1000 if duration > 0 else 0  # as format_ms
            parts.append(f"{prefixes.get(name) or entry_prefix(name)}{us // 1000}{thousandths[us % 1000]}")
        for name, entry in timeline.generators.items():
            if name in upstream_names:  # waits summed over the request (e.g. for the upstream's body)
                upstream += entry[GeneratorEntry.SELF_NS]
            parts.append(server_timing_entry(name, entry[GeneratorEntry.SELF_NS]))
        paused = _GC.total_ns - timeline.gc_pause_ns
        if paused:
            parts.append(server_timing_entry("gc", paused))
        headers = list(headers)
        if middleware.server_timing and parts:
            headers.append((_SERVER_TIMING_HEADER, ", ".join(parts).encode()))
        if middleware.overhead_header:
            headers.append((_OVERHEAD_HEADER, format_ms(now - timeline.start_ns - upstream).encode()))
        return {**message, "headers": headers}  # the app's own message and header list stay as they were

    def _on_body(self, body: bytes) -> None:
        if type(body) is not bytes:
            body = bytes(body)  # a memoryview or bytearray (Starlette passes memoryviews on)
        timeline = self._timeline
        if not timeline.body_bytes:
            timeline.marks["first_body_byte"] = perf_counter_ns()
        timeline.body_bytes += len(body)
        timeline.chunks += 1
        scanner = self._scanner
        if scanner is not None and scanner.feed(body):
            timeline.marks["first_token"] = perf_counter_ns()
            self._batch = []

    def finish(self) -> None:
        # The request ends at its last byte; the app's time after it, to its
        # return (now), is its own part. Without a last byte it ends now.
        timeline = self._timeline
        now = perf_counter_ns()
        last_byte = timeline.marks.get("last_byte") if self._complete else None
        if last_byte is None:
            timeline.end_ns = now
        else:
            timeline.end_ns = last_byte
            timeline.after_last_byte_ns = now - last_byte
        timeline.gc_pause_ns = _GC.total_ns - timeline.gc_pause_ns
        try:
            if self._batch:
                self._count_batch()  # a stream that ended early (disconnect, error)
            if self._scanner is not None:
                timeline.chunks = self._scanner.chunks
            if not self._complete and timeline.error is None:
                timeline.error = "client_disconnected" if self._disconnected else "incomplete_response"
            _sink.sink(timeline)
        except Exception as exc:
            internal_error("middleware.finish", exc)
