"""The traffic tally: every HTTP request, recorded or not, counted in the worker.

Recording is a sample (``_sampling``); the request metrics must not be. Each
request adds one observation to a series keyed by (method, route template,
status code, error type, streaming, recorded), and each series holds a count
and fixed-bucket histograms of the request's duration and, for streams, its
time to first token. Nothing per request leaves the worker: the export thread
reads the series (``series()``) and ships them as one frame
(``_layouts.TRAFFIC_*``), which the agent turns into the request metric families.

- An unrecorded request goes through a ``Passage`` (the app gets its bound
  ``send``): the server's ``send`` wrapped, reading only the response start (status, whether the body is an
  event stream) and, for a stream, its bodies until the first content token
  (``_sse``: the same definition of TTFT as a recorded request's); after
  that it reads no message as it passes, and the last one, read when the
  request ends, says whether the response finished.
- A recorded request adds its finished timeline's figures (``add``).

A request's duration ends at its response's last byte, recorded or not
(``RequestRecord.end_ns``): a passage reads the clock as each message
passes; without a last byte, when the app returns (docs/telemetry.md#the-requests-end).

Labels stay bounded whatever the clients send: a method outside HTTP's
standard ones is ``_OTHER`` (as OpenTelemetry's semantic conventions write
it), a request no route matched has the route ``UNMATCHED_ROUTE`` (never the
raw path), and past ``MAX_SERIES`` series the new ones fold into one series
whose labels are all ``_OTHER``.

This is the pure-Python reference; the C accelerator's ``Tally`` and
``Passage`` (``csrc/tally.c``, ``csrc/passage.c``) do the same, and tests compare the two.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Awaitable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Protocol, TypeAlias

from ..types import Message, Scope, Send
from ._guard import internal_error
from ._layouts import BOUNDARIES_NS, TRAFFIC_HEAD_COUNTS
from ._sse import SseScanner, is_event_stream

if TYPE_CHECKING:
    from ._speedups import Tally as _CTally
    from ._timeline import Timeline

__all__ = [
    "KNOWN_METHODS",
    "MAX_SERIES",
    "OTHER",
    "UNMATCHED_ROUTE",
    "INCOMPLETE_RESPONSE",
    "SeriesKey",
    "Tally",
    "PassageSend",
    "counts_size",
    "route_of",
    "tally_recorded",
    "_PyPassage",
    "_PyTally",
]

KNOWN_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"))
OTHER = "_OTHER"
UNMATCHED_ROUTE = "(unmatched)"
INCOMPLETE_RESPONSE = "incomplete_response"
MAX_SERIES = 2000
# The ASGI messages a passage reads.
_START = "http.response.start"
_BODY = "http.response.body"
_TRAILERS = "http.response.trailers"

SeriesKey = tuple[str, str, int, str, bool, bool]
"""(method, route, status, error type or "", streaming, recorded)."""
# A series' counts, flat: the duration's count, sum, min and max (ns), the
# TTFT's likewise, then the duration's buckets and the TTFT's
# (len(BOUNDARIES_NS) + 1 each). A min and max are 0 while the count is.
_HEAD = TRAFFIC_HEAD_COUNTS
_BUCKETS = len(BOUNDARIES_NS) + 1


class PassageSend(Protocol):
    """An unrecorded request's ``send`` (``_PyPassage``, or C's ``Passage``)."""

    def __call__(self, message: Message) -> Awaitable[None]: ...
    def send(self, message: Message) -> Awaitable[None]:
        """The same as the call: the ``send`` the middleware hands the app."""
        ...

    def close(self, scope: Scope, error: str | None) -> None: ...


Tally: TypeAlias = "_PyTally | _CTally"
"""A process's tally: ``_PyTally``, or C's ``Tally`` (declared in ``_speedups.pyi``)."""


def counts_size() -> int:
    """How many numbers a series holds."""
    return _HEAD + 2 * _BUCKETS


def route_of(scope: Scope) -> str:
    """The matched route's template once the app has run (the router sets
    ``scope["route"]``), else ``UNMATCHED_ROUTE``: never the raw path."""
    route = getattr(scope.get("route"), "path", None)
    return route if isinstance(route, str) and route else UNMATCHED_ROUTE


class _PyTally:
    """The series of one process's requests (one per backend: ``_backend``)."""

    __slots__ = ("_index", "_series", "requests", "max_series")

    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self._index: dict[SeriesKey, list[int]] = {}
        self._series: list[tuple[SeriesKey, list[int]]] = []
        self.requests = 0  # added so far: the export ships the series when it grew
        self.max_series = max_series

    def add(
        self,
        method: str,
        route: str,
        status: int,
        error: str,
        streaming: bool,
        recorded: bool,
        duration_ns: int,
        ttft_ns: int,
    ) -> None:
        """One finished request; ``ttft_ns`` < 0: no first token (or not a stream)."""
        if method not in KNOWN_METHODS:
            method = OTHER
        key = (method, route, status, error, streaming, recorded)
        counts = self._index.get(key)
        if counts is None:
            if len(self._series) >= self.max_series:
                key = (OTHER, OTHER, 0, OTHER, streaming, recorded)
                counts = self._index.get(key)
            if counts is None:
                counts = self._index[key] = [0] * counts_size()
                self._series.append((key, counts))
        if duration_ns < 0:
            duration_ns = 0
        _observe(counts, 0, _HEAD, duration_ns)
        if ttft_ns >= 0:
            _observe(counts, 4, _HEAD + _BUCKETS, ttft_ns)
        self.requests += 1

    def add_recorded(self, timeline: Timeline, scope: Scope) -> None:
        """A recorded request, once its exchange has finished the timeline. A
        client that went away is ``incomplete_response``, as an unrecorded
        request's would be (its passage does not watch ``receive``)."""
        error = timeline.error
        if error is None:
            error = ""
        elif error == "client_disconnected":
            error = INCOMPLETE_RESPONSE
        first = timeline.marks.get("first_token")
        start = timeline.start_ns
        self.add(
            timeline.method,
            route_of(scope),
            timeline.status,
            error,
            timeline.streaming,
            True,
            timeline.end_ns - start,
            -1 if first is None else first - start,
        )

    def passage(self, method: str, send: Send) -> _PyPassage:
        """The ``send`` of an unrecorded request that starts now."""
        return _PyPassage(self, method, send)

    def series(self) -> list[tuple[SeriesKey, tuple[int, ...]]]:
        """Every series so far, in the order each began, with a copy of its counts."""
        return [(key, tuple(counts)) for key, counts in self._series]

    def clear(self) -> None:
        """Forget every series (tests start from nothing)."""
        self._index.clear()
        self._series.clear()
        self.requests = 0


def _observe(counts: list[int], at: int, buckets_at: int, value_ns: int) -> None:
    # bisect_left: bucket i holds (bound[i-1], bound[i]], as OTLP defines it.
    counts[buckets_at + bisect_left(BOUNDARIES_NS, value_ns)] += 1
    if not counts[at] or value_ns < counts[at + 2]:
        counts[at + 2] = value_ns
    if value_ns > counts[at + 3]:
        counts[at + 3] = value_ns
    counts[at] += 1
    counts[at + 1] += value_ns


class _PyPassage:
    """An unrecorded request's ``send``: passes every message on, and adds the
    request to the tally when the middleware closes it.

    It reads each message while it is watching: until the response start
    (status, whether the body is an event stream) and, for a stream, until
    the first content token. After that it reads nothing as messages pass,
    only keeps the last one and when it passed, which say at close whether
    the response finished (a body with no more to come, or trailers, which
    follow it) and when: the request's end."""

    __slots__ = (
        "_tally",
        "_send",
        "_method",
        "_start_ns",
        "_status",
        "_streaming",
        "_scanner",
        "_ttft_ns",
        "_complete",
        "_watching",
        "_started",
        "_last",
        "_last_ns",
    )

    def __init__(self, tally: _PyTally, method: str, send: Send) -> None:
        self._start_ns = perf_counter_ns()
        self._tally = tally
        self._send = send
        self._method = method
        self._status = 0
        self._streaming = False
        self._scanner: SseScanner | None = None  # an event stream's, until its first token
        self._ttft_ns = -1
        self._complete = False
        self._watching = True
        self._started = False
        self._last: Message | None = None  # the last message passed, unread
        self._last_ns = 0  # when the last message passed: the last byte's time, once the response finished

    def __call__(self, message: Message) -> Awaitable[None]:
        self._last_ns = perf_counter_ns()
        if self._watching:
            try:
                self._read(message)
            except Exception as exc:  # perfkit's bug must never become the app's
                internal_error("middleware.passage", exc)
        else:
            self._last = message  # most of a stream's messages: nothing read
        return self._send(message)

    send = __call__  # what the middleware hands the app (C's is a bound builtin method, called faster)

    def _read(self, message: Message) -> None:
        kind = message["type"]
        if kind == _BODY:
            self._on_body(message)
        elif kind == _START:
            self._started = True
            self._watching = False  # unless the body is an event stream
            self._status = int(message["status"])
            if is_event_stream(message.get("headers", ())):
                self._streaming = True
                self._scanner = SseScanner()
                self._watching = True

    def _on_body(self, message: Message) -> None:
        scanner = self._scanner
        if scanner is not None:
            body = message.get("body", b"")
            if body and scanner.feed(body if type(body) is bytes else bytes(body)):
                self._ttft_ns = perf_counter_ns() - self._start_ns
                self._scanner = None
                self._watching = not self._started
        if not message.get("more_body", False):
            self._complete = True

    def close(self, scope: Scope, error: str | None) -> None:
        """The app returned (``error`` None) or raised (its type's name): add the request."""
        end = perf_counter_ns()
        try:
            last, self._last = self._last, None
            if last is not None:
                kind = last["type"]
                if kind == _BODY:
                    self._on_body(last)
                elif kind == _TRAILERS:
                    self._complete = True
            if error is None:
                error = "" if self._complete else INCOMPLETE_RESPONSE
            if self._complete:
                end = self._last_ns  # the request ends at its last byte, as a recorded one's
            self._tally.add(
                self._method,
                route_of(scope),
                self._status,
                error,
                self._streaming,
                False,
                end - self._start_ns,
                self._ttft_ns,
            )
        except Exception as exc:
            internal_error("middleware.passage", exc)


def tally_recorded(tally: Tally, timeline: Timeline, scope: Scope) -> None:
    """Add a recorded request (``Tally.add_recorded``), perfkit's failure counted, never raised."""
    try:
        tally.add_recorded(timeline, scope)
    except Exception as exc:
        internal_error("middleware.tally", exc)
