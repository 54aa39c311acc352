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

from .._core._layouts import BOUNDARIES_NS  # shared with the traffic tally, C's and Python's
from .._wire._names import STAGE_METRIC_ATTRIBUTE, Attr, Metric, gen_ai_operation
from ..types import AttributeValue, RequestRecord

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


class Histogram:
    __slots__ = ("counts", "count", "total_ns", "minimum_ns", "maximum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDARIES_NS) + 1)
        self.count = 0
        self.total_ns = 0
        self.minimum_ns = 1 << 62
        self.maximum_ns = 0

    def record(self, value_ns: int, weight: int = 1) -> None:
        """One value, standing for ``weight`` requests (a weighted sample's adjusted count)."""
        # bisect_left: bucket i holds (bound[i-1], bound[i]], as OTLP defines it.
        self.counts[bisect_left(BOUNDARIES_NS, value_ns)] += weight
        self.count += weight
        self.total_ns += value_ns * weight
        if value_ns < self.minimum_ns:
            self.minimum_ns = value_ns
        if value_ns > self.maximum_ns:
            self.maximum_ns = value_ns

    def copy(self) -> Histogram:
        twin = Histogram()
        twin.counts = list(self.counts)
        twin.count, twin.total_ns = self.count, self.total_ns
        twin.minimum_ns, twin.maximum_ns = self.minimum_ns, self.maximum_ns
        return twin


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

    def observe(self, record: RequestRecord) -> None:
        """A recorded request's figures, each standing for the requests it does
        (a weighted sample: counts estimate every request's). Its duration,
        TTFT and count are the traffic tally's (every request once), not
        observed here."""
        weight = record.weight
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
        stages = self._stages
        for entry in record.stages:
            histogram = stages.get(entry.name)
            if histogram is None:
                histogram = stages[entry.name] = self._histogram(
                    Metric.STAGE_DURATION, ((STAGE_METRIC_ATTRIBUTE, entry.name),)
                )
            histogram.record(entry.duration_ns, weight)

    def snapshot(self) -> list[tuple[MetricKey, Histogram]]:
        with self._lock:
            items = list(self.histograms.items()) + self.traffic_histograms
        return [(key, histogram.copy()) for key, histogram in items]
