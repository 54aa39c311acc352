"""perfkit's metrics: histograms and counters, exported as cumulative OTLP
explicit-bucket histograms and sums (and Prometheus, ``_prometheus``).

The request families (duration, TTFT, ``perfkit.requests``) cover every
request: they come from the workers' traffic tally (``_traffic``). The
others (stages, overhead, collector pauses) are observed here from each
recorded request (whether or not the trace sampler exports its spans), each
counted as the requests it stands for (its adjusted count, 1 + ``passed_by``):
a weighted sample whose counts estimate every request's. The counters of
recorded requests (``perfkit.requests.*_unmeasured``) count records.

Values are kept in integer nanoseconds (cheap to bisect) and exported in
seconds, the unit the OTel semantic conventions give these metrics.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._core._layouts import BOUNDARIES_NS  # shared with the traffic tally, C's and Python's
from .._wire._names import STAGE_METRIC_ATTRIBUTE, Attr, Metric, gen_ai_operation
from ..types import AttributeValue, RequestRecord, StageRecord

__all__ = [
    "Histogram",
    "MetricStore",
    "BOUNDARIES_NS",
    "COUNTER_DESCRIPTIONS",
    "DESCRIPTIONS",
]

_WEIGHTED = "a weighted sample, each recorded request counted as the requests it stands for."
DESCRIPTIONS: dict[str, str] = {
    Metric.REQUEST_DURATION: "Request received to last response byte; every request, recorded or not.",
    Metric.TIME_TO_FIRST_TOKEN: "Request received to the first content token sent (streams), generative-AI routes; every request.",
    Metric.LLM_REQUEST_DURATION: "Request received to last response byte, generative-AI routes; every request, recorded or not.",
    Metric.STAGE_DURATION: f"Duration of one named stage (generator stages: their own time); {_WEIGHTED}",
    Metric.GC_PAUSE: f"Garbage-collector pause time inside one request's wall time (0 when none); {_WEIGHTED}",
    Metric.REQUEST_OVERHEAD: f"The gateway's own time in one request: its duration minus its upstream stages, generative-AI endpoints; {_WEIGHTED}",
}

MetricKey = tuple[str, tuple[tuple[str, AttributeValue], ...]]


class _PyHistogram:
    """An explicit-bucket histogram of ns values: the reference for the C accelerator's ``Histogram``."""

    __slots__ = ("counts", "count", "total_ns", "minimum_ns", "maximum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDARIES_NS) + 1)
        self.count = 0
        self.total_ns = 0
        self.minimum_ns = 1 << 62
        self.maximum_ns = 0

    def record(self, value_ns: int, weight: int = 1, /) -> None:
        """One value, standing for ``weight`` requests (a weighted sample's adjusted count)."""
        # bisect_left: bucket i holds (bound[i-1], bound[i]], as OTLP defines it.
        self.counts[bisect_left(BOUNDARIES_NS, value_ns)] += weight
        self.count += weight
        self.total_ns += value_ns * weight
        if value_ns < self.minimum_ns:
            self.minimum_ns = value_ns
        if value_ns > self.maximum_ns:
            self.maximum_ns = value_ns

    def copy(self) -> _PyHistogram:
        twin = _PyHistogram()
        twin.counts = list(self.counts)
        twin.count, twin.total_ns = self.count, self.total_ns
        twin.minimum_ns, twin.maximum_ns = self.minimum_ns, self.maximum_ns
        return twin


def _observe_stages_python(
    histograms: dict[str, Any],
    stages: tuple[StageRecord, ...],
    durations: list[int],
    weight: int,
    make: Callable[[str], Any],
) -> None:
    """Each stage's duration (by position) into its name's histogram, made by ``make`` the first time:
    the reference for the C accelerator's ``observe_stages``."""
    for stage, duration in zip(stages, durations, strict=True):
        histogram = histograms.get(stage.name)
        if histogram is None:
            histogram = make(stage.name)
        histogram.record(duration, weight)


def _histogram_functions() -> tuple[type[_PyHistogram], Callable[..., None]]:
    """The C accelerator's ``Histogram`` and ``observe_stages`` when it runs, else the Python references."""
    from .._core._backend import ACTIVE

    speedups = ACTIVE.speedups
    if speedups is None:
        return _PyHistogram, _observe_stages_python
    return speedups.Histogram, speedups.observe_stages


if TYPE_CHECKING:
    Histogram = _PyHistogram  # the C type has the same members
    _observe_stages = _observe_stages_python
else:
    Histogram, _observe_stages = _histogram_functions()


COUNTER_DESCRIPTIONS: dict[str, str] = {
    Metric.REQUESTS_DROPPED: "Recorded requests a full export queue (or a failed hand-off) dropped: no spans, no stage metrics.",
    Metric.SPANS_DROPPED: "Spans a failed export dropped.",
    Metric.REQUESTS_UPSTREAM_UNMEASURED: "Recorded requests whose upstream time perfkit could not measure (docs/litellm.md).",
    Metric.REQUESTS_AUTH_UNMEASURED: "Recorded requests whose auth stage perfkit could not measure (docs/litellm.md).",
}


class MetricStore:
    """Histograms keyed by (metric, attributes), plus perfkit's own counters."""

    def __init__(self) -> None:
        self.histograms: dict[MetricKey, Histogram] = {}
        self._stages: dict[str, Histogram] = {}  # a shortcut to the per-stage entries
        self.counters: dict[str, int] = {
            Metric.SPANS_DROPPED: 0,
            Metric.REQUESTS_DROPPED: 0,
            Metric.REQUESTS_UPSTREAM_UNMEASURED: 0,
            Metric.REQUESTS_AUTH_UNMEASURED: 0,
        }
        # The request families and perfkit.requests, from the traffic tally (_traffic.keep).
        self.traffic_histograms: list[tuple[MetricKey, Histogram]] = []
        self.traffic_counters: list[tuple[tuple[tuple[str, AttributeValue], ...], int]] = []
        self._lock = threading.Lock()
        self._gc_pause = self._histogram(Metric.GC_PAUSE, ())

    def _histogram(self, name: str, attributes: tuple[tuple[str, AttributeValue], ...]) -> Histogram:
        key = (name, attributes)
        histogram = self.histograms.get(key)
        if histogram is None:
            with self._lock:
                histogram = self.histograms[key] = Histogram()
        return histogram

    def _stage_histogram(self, name: str) -> Histogram:
        histogram = self._stages[name] = self._histogram(Metric.STAGE_DURATION, ((STAGE_METRIC_ATTRIBUTE, name),))
        return histogram

    def observe(self, record: RequestRecord, durations: list[int] | None = None) -> None:
        """A recorded request's figures, each standing for the requests it does
        (a weighted sample: counts estimate every request's). Its duration,
        TTFT and count are the traffic tally's (every request once), not
        observed here. ``durations``: each stage's ``duration_ns``, by
        position, when the caller has them already."""
        weight = record.weight
        if durations is None:
            durations = [stage.duration_ns for stage in record.stages]
        if gen_ai_operation(record.path) is not None:
            self._histogram(Metric.REQUEST_OVERHEAD, ((Attr.STREAMING, record.streaming),)).record(
                record.overhead_ns, weight
            )
        self._gc_pause.record(record.gc_pause_ns, weight)
        if record.attributes:
            attributes = record.attributes
            if attributes.get(Attr.UPSTREAM_UNMEASURED):
                self.counters[Metric.REQUESTS_UPSTREAM_UNMEASURED] += 1
            if attributes.get(Attr.AUTH_UNMEASURED):
                self.counters[Metric.REQUESTS_AUTH_UNMEASURED] += 1
        _observe_stages(self._stages, record.stages, durations, weight, self._stage_histogram)

    def snapshot(self) -> list[tuple[MetricKey, Histogram]]:
        with self._lock:
            items = list(self.histograms.items()) + self.traffic_histograms
        return [(key, histogram.copy()) for key, histogram in items]
