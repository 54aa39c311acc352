"""Which requests are recorded: ``PERFKIT_RECORD_RATIO`` and ``PERFKIT_RECORD_RATE``,
and what each recorded one stands for.

OpenTelemetry's samplers (``OTEL_TRACES_SAMPLER``) choose which recorded
requests become spans, after the fact. These two choose which requests are
recorded at all, when each starts: the rest pass through the middleware
with no timeline, stages or step accounting, so perfkit's cost falls in
proportion (docs/overhead.md). The traffic tally still counts each with its
route, status and times (``_traffic``: ``perfkit.requests{perfkit.recorded="false"}``).

- Each request is drawn at random, not tied to a trace id, nor to when it
  came: its chance is the ratio, or less where the rate needs it (the rate
  over the arrivals of the second before). A choice by arrival time alone
  (the first request after each due time of a pace) locks onto steady
  offsets between kinds of traffic, and can leave a kind out.
- The rate caps recorded requests per second per process: the draw aims at
  it, and a ``Pace`` holds it, with two seconds' worth allowed at once so
  that the draw's own ups and downs rarely meet it. By default it is 10: an
  idle or lightly used proxy has every request recorded, and a saturated
  one pays for about ten a second, about 1% of a core (a recorded LiteLLM
  request costs 0.5-1.5 ms of CPU with its export; docs/overhead.md).
  ``all`` lifts the cap.
- Each recorded request carries its weight, the requests it stands for:
  itself and those passed by since the previous one recorded
  (``RecordChoice``; the estimator and its error: docs/telemetry.md).
- Two kinds are recorded without asking either (``PerfkitMiddleware``),
  with weight 1: a request carrying the header secret, and one whose
  ``traceparent`` is sampled (``sampled_parent``: parent-based, as
  OpenTelemetry's ``ParentBased`` sampler), the latter at most
  ``PERFKIT_RECORD_TRACED_RATE`` a second (default ``all``).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterable
from time import perf_counter_ns
from typing import Final

from .._wire._environment_variables import PERFKIT_RECORD_RATE, PERFKIT_RECORD_RATIO, PERFKIT_RECORD_TRACED_RATE
from .._wire._headers import parse_traceparent
from .._wire._names import HEADER_SECRET_HEADER, TRACEPARENT_HEADER
from .._wire._record_rate import DEFAULT_RECORD_RATE, parse_record_rate, record_rate_in
from ..types import RecordRate
from ._guard import warn_once

__all__ = [
    "HeadersFound",
    "Pace",
    "RecordChoice",
    "UNRECORDED",
    "draw",
    "effective_size",
    "pace_for",
    "record_ratio_from_env",
    "record_rate_from_env",
    "sampled_parent",
    "scan_headers",
    "rank_standard_error",
    "traced_rate_from_env",
    "weighted_quantile",
]

_random = random.Random()
draw = _random.random
# A worker forked from a process that drew (gunicorn --preload) would draw the same numbers.
os.register_at_fork(after_in_child=_random.seed)


class _Unrecorded:
    """Requests the record choices of this process passed by, all middlewares together
    (a total; the traffic tally has them by route and status)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


UNRECORDED = _Unrecorded()


class Pace:
    """At most ``rate`` a second: a generic cell rate algorithm, at an even
    pace with ``burst_s`` seconds' worth (at least one) allowed at once."""

    __slots__ = ("_clock", "_interval_ns", "_tolerance_ns", "_due_ns")

    def __init__(self, rate: float, clock: Callable[[], int] = perf_counter_ns, burst_s: float = 1.0) -> None:
        self._clock = clock
        self._interval_ns = max(1, round(1e9 / rate))
        self._tolerance_ns = (max(1, int(rate * burst_s)) - 1) * self._interval_ns
        self._due_ns = 0  # when the next one is due at the even pace

    def allows(self, now: int | None = None) -> bool:
        """Whether one more may go at ``now`` (default: the clock's now); if so, it is taken."""
        if now is None:
            now = self._clock()
        due = self._due_ns
        if due < now:
            due = now
        elif due - now > self._tolerance_ns:
            return False
        self._due_ns = due + self._interval_ns
        return True


def pace_for(rate: RecordRate, clock: Callable[[], int] = perf_counter_ns) -> Pace | None:
    """The pace of ``rate``; None for ``all`` (no cap)."""
    return None if rate == "all" else Pace(rate, clock)


_WINDOW_NS: Final = 1_000_000_000  # the arrivals the rate's chance is read from
_CEILING_BURST_S: Final = 2.0  # the pace's allowance over the draw's aim


class RecordChoice:
    """Records a request with a chance of ``ratio``, or less above ``rate``:
    ``min(ratio, rate / arrivals a second)``, the arrivals those of the
    window before (at least a second). A ``Pace`` at ``rate`` holds the cap
    where the draws overshoot.

    ``record()`` returns the recorded request's weight: itself and every
    request this choice passed by since the one it recorded before
    (docs/telemetry.md#the-weighted-sample), or 0 when it passes this one
    by. A request recorded without asking it (``PerfkitMiddleware``'s
    secret holders and sampled parents) neither takes its pace nor ends its
    count, so the weights it gives still add up to the requests it saw."""

    __slots__ = (
        "ratio",
        "rate",
        "_clock",
        "_draw",
        "_pace",
        "_passed",
        "_per_s",
        "_chance",
        "_window_start_ns",
        "_arrivals",
    )

    def __init__(
        self,
        ratio: float,
        rate: RecordRate,
        clock: Callable[[], int] = perf_counter_ns,
        random_draw: Callable[[], float] | None = None,
    ) -> None:
        self.ratio = ratio
        self.rate = rate
        self._clock = clock
        self._draw = draw if random_draw is None else random_draw
        self._per_s = math.inf if rate == "all" else rate
        self._pace = None if rate == "all" else Pace(rate, clock, _CEILING_BURST_S)
        self._passed = 0  # requests passed by since the last one recorded
        self._chance = 1.0  # the rate's chance in the window under way
        self._window_start_ns = -_WINDOW_NS
        self._arrivals = 0  # requests the ratio let through in the window under way

    @property
    def every_request(self) -> bool:
        return self.ratio >= 1.0 and self.rate == "all"

    def record(self) -> int:
        """The weight of the request that starts now if it is recorded, else 0 (and it is counted)."""
        ratio = self.ratio
        # The ratio's draw first, so that a request it passes by costs no clock; the rate's chance
        # is then over the requests the ratio let through, the two together min(ratio, rate / seen).
        if ratio < 1.0 and self._draw() >= ratio:
            UNRECORDED.count += 1
            self._passed += 1
            return 0
        pace = self._pace
        if pace is not None:
            now = self._clock()
            elapsed = now - self._window_start_ns
            if elapsed >= _WINDOW_NS:
                # Over the window that ended (longer than a second when the proxy idled).
                seen_per_s = self._arrivals * 1e9 / elapsed
                per_s = self._per_s
                self._chance = 1.0 if seen_per_s <= per_s else per_s / seen_per_s
                self._window_start_ns, self._arrivals = now, 0
            self._arrivals += 1
            chance = self._chance
            if (chance < 1.0 and self._draw() >= chance) or not pace.allows(now):
                UNRECORDED.count += 1
                self._passed += 1
                return 0
        weight = self._passed + 1
        self._passed = 0
        return weight


def weighted_quantile(sample: list[tuple[float, int]], q: float) -> float:
    """The q-quantile of a weighted sample of (value, weight), as ``record()`` weighs it: the
    smallest value whose weighted rank reaches q (docs/telemetry.md#the-weighted-sample)."""
    ordered = sorted(sample)
    total = sum(weight for _, weight in ordered)
    running = 0
    for value, weight in ordered:
        running += weight
        if running >= q * total:
            return value
    return ordered[-1][0]


def effective_size(sample: list[tuple[float, int]]) -> float:
    """Kish's effective sample size of (value, weight): (sum w)^2 / sum w^2."""
    return sum(weight for _, weight in sample) ** 2 / sum(weight * weight for _, weight in sample)


def rank_standard_error(q: float, n: float) -> float:
    """How far, as a share of ranks, a weighted q-quantile of effective size n stands from the
    population's, one standard error: sqrt(q(1-q)/n) (docs/telemetry.md#the-weighted-sample)."""
    return math.sqrt(q * (1 - q) / n)


def record_ratio_from_env() -> float:
    """``PERFKIT_RECORD_RATIO``: a number from 0 to 1 (default 1); anything else warns and means 1."""
    raw = os.environ.get(PERFKIT_RECORD_RATIO, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        warn_once(
            "record_ratio", "perfkit: PERFKIT_RECORD_RATIO=%r is not a number from 0 to 1; recording every request", raw
        )
        return 1.0
    return value


def record_rate_from_env() -> RecordRate:
    """``PERFKIT_RECORD_RATE``: ``all`` or requests per second (default 10); anything else warns and means 10."""
    rate = record_rate_in(os.environ)
    if rate is None:
        warn_once(
            "record_rate",
            "perfkit: %s=%r is neither 'all' nor a positive number; recording about %g requests a second",
            PERFKIT_RECORD_RATE,
            os.environ[PERFKIT_RECORD_RATE].strip(),
            DEFAULT_RECORD_RATE,
        )
        return DEFAULT_RECORD_RATE
    return rate


def traced_rate_from_env() -> RecordRate:
    """``PERFKIT_RECORD_TRACED_RATE``: ``all`` (default) or requests a second; anything else warns and means ``all``."""
    raw = os.environ.get(PERFKIT_RECORD_TRACED_RATE, "").strip()
    if not raw:
        return "all"
    try:
        return parse_record_rate(raw)
    except ValueError:
        warn_once(
            "record_traced_rate",
            "perfkit: %s=%r is neither 'all' nor a positive number; recording every request with a sampled traceparent",
            PERFKIT_RECORD_TRACED_RATE,
            raw,
        )
        return "all"


# The hex digits of an odd value: a traceparent's flags end in one when its
# sampled bit (0x01) is set.
_ODD_HEX = frozenset(b"13579bdfBDF")


class HeadersFound:
    """Bits of ``scan_headers``' answer (C's ``PK_FOUND_*``)."""

    SECRET: Final = 1  # an x-perfkit-secret header
    SAMPLED: Final = 2  # a traceparent whose flags' last digit is odd: sampled, if it is valid
    UNREAD: Final = 4  # a header the C scan does not read (not a (bytes, ...) tuple): read them all


_SECRET_HEADER = HEADER_SECRET_HEADER.encode()
_TRACEPARENT_HEADER = TRACEPARENT_HEADER.encode()


def scan_headers(headers: Iterable[tuple[bytes, bytes]]) -> int:
    """What a request's headers ask of the record choice, in one pass on
    every request (``HeadersFound``; 0 for most): the reference for the C
    accelerator's ``scan_headers``, which the middleware calls when it runs."""
    found = 0
    for name, value in headers:
        if name == _SECRET_HEADER:
            found |= HeadersFound.SECRET
        elif name == _TRACEPARENT_HEADER and len(value) > 54 and value[54] in _ODD_HEX:
            found |= HeadersFound.SAMPLED
    return found


def sampled_parent(value: bytes) -> bool:
    """Whether a ``traceparent`` header's value is a valid W3C traceparent with the sampled flag.

    Position 54 is the flags' last digit in every valid value (a later
    version only appends): an even digit there is answered without parsing."""
    if len(value) < 55 or value[54] not in _ODD_HEX:
        return False
    parent = parse_traceparent(value.decode("latin-1"))
    return parent is not None and bool(parent[2] & 1)
