"""Which requests are recorded: ``PERFKIT_RECORD_RATIO`` and ``PERFKIT_RECORD_RATE``.

OpenTelemetry's samplers (``OTEL_TRACES_SAMPLER``) choose which recorded
requests become spans, after the fact. These two choose which requests are
recorded at all, when each starts: the rest pass through the middleware
untouched (no timeline, no stages, no step accounting, nothing exported),
so perfkit's cost falls in proportion (docs/overhead.md). They are only
counted (``perfkit.requests.unrecorded``), so that the metrics say what share
of the traffic they describe.

- The ratio is drawn at random per request, not tied to a trace id.
- The rate caps recorded requests per second per process (a generic cell
  rate algorithm: an even pace, with one second's worth allowed at once).
  By default it is 10: an idle or lightly used proxy has every request
  recorded, and a saturated one pays for ten a second, about 1% of a core
  (a recorded LiteLLM request costs 0.5-1.5 ms of CPU with its export;
  docs/overhead.md). ``all`` lifts the cap.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from time import perf_counter_ns

from .._wire._environment_variables import PERFKIT_RECORD_RATE, PERFKIT_RECORD_RATIO
from .._wire._record_rate import DEFAULT_RECORD_RATE, record_rate_in
from ..types import RecordRate
from ._guard import warn_once

__all__ = ["RecordChoice", "UNRECORDED", "draw", "record_ratio_from_env", "record_rate_from_env"]

draw = random.Random().random


class _Unrecorded:
    """Requests passed through unrecorded in this process, by every middleware (read by the export)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


UNRECORDED = _Unrecorded()


class RecordChoice:
    """Records a request if a draw falls below ``ratio`` and the rate allows one more."""

    __slots__ = ("ratio", "rate", "_clock", "_interval_ns", "_tolerance_ns", "_due_ns")

    def __init__(self, ratio: float, rate: RecordRate, clock: Callable[[], int] = perf_counter_ns) -> None:
        self.ratio = ratio
        self.rate = rate
        self._clock = clock
        if rate == "all":
            self._interval_ns = 0
            self._tolerance_ns = 0
        else:
            self._interval_ns = max(1, round(1e9 / rate))
            self._tolerance_ns = (max(1, int(rate)) - 1) * self._interval_ns
        self._due_ns = 0  # when the next request is due at the even pace

    @property
    def every_request(self) -> bool:
        return self.ratio >= 1.0 and self.rate == "all"

    def record(self) -> bool:
        """Whether to record the request that starts now (counted if not)."""
        if self.ratio < 1.0 and draw() >= self.ratio:
            UNRECORDED.count += 1
            return False
        interval = self._interval_ns
        if interval:
            now = self._clock()
            due = self._due_ns
            if due < now:
                due = now
            elif due - now > self._tolerance_ns:
                UNRECORDED.count += 1
                return False
            self._due_ns = due + interval
        return True


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
            "perfkit: %s=%r is neither 'all' nor a positive number; recording at most %g requests a second",
            PERFKIT_RECORD_RATE,
            os.environ[PERFKIT_RECORD_RATE].strip(),
            DEFAULT_RECORD_RATE,
        )
        return DEFAULT_RECORD_RATE
    return rate
