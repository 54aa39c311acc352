"""Histograms over every recorded request (whether or not the trace sampler
exports its spans; requests the record rate passes by are only counted),
aggregated in the export thread and exported as cumulative OTLP
explicit-bucket histograms.

Values are kept in integer nanoseconds (cheap to bisect) and exported in
seconds, the unit the OTel semantic conventions give these metrics.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

from .._wire._names import Attr, SemConv, gen_ai_operation
from ..types import AttributeValue, RequestRecord

__all__ = [
    "Histogram",
    "MetricStore",
    "BOUNDARIES_NS",
    "DESCRIPTIONS",
    "LLM_REQUEST_DURATION",
    "REQUEST_DURATION",
    "TIME_TO_FIRST_TOKEN",
    "REQUESTS_DROPPED_COUNTER",
    "SPANS_DROPPED_COUNTER",
    "UNRECORDED_COUNTER",
]

# Fine at the low end: gateway stages take tens of microseconds.
BOUNDARIES_NS: tuple[int, ...] = tuple(
    int(ms * 1_000_000)
    for ms in (
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        2.5,
        5,
        10,
        25,
        50,
        75,
        100,
        250,
        500,
        750,
        1000,
        2500,
        5000,
        7500,
        10000,
    )
)

# The OTel conventions' http.server.request.duration and the gen_ai.server.*
# metrics are also emitted by LiteLLM's otel callback and by the FastAPI
# instrumentation, with other definitions: perfkit's are its own, so that
# series of one name never mix in a backend.
REQUEST_DURATION = "perfkit.request.duration"
LLM_REQUEST_DURATION = "perfkit.llm_request.duration"
TIME_TO_FIRST_TOKEN = "perfkit.time_to_first_token"

DESCRIPTIONS: dict[str, str] = {
    REQUEST_DURATION: "Request received to last response byte.",
    TIME_TO_FIRST_TOKEN: "Request received to the first content token sent (streams).",
    LLM_REQUEST_DURATION: "Request received to last response byte, generative-AI endpoints.",
    "perfkit.stage.duration": "Duration of one named stage (generator stages: their own time); a weighted sample, each recorded request counted as the requests it stands for.",
    "perfkit.gc.pause": "Garbage-collector pause time inside one request's wall time (0 when none).",
    "perfkit.request.overhead": "The gateway's own time in one request: its duration minus its upstream stages, generative-AI endpoints.",
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


# Requests perfkit could not fully measure (docs/litellm.md), by their span attribute.
_UPSTREAM_UNMEASURED = "perfkit.requests.upstream_unmeasured"
_AUTH_UNMEASURED = "perfkit.requests.auth_unmeasured"
# Requests passed through unrecorded (_core._sampling): the metrics describe the rest.
UNRECORDED_COUNTER = "perfkit.requests.unrecorded"
# Requests a full export queue dropped, and spans a failed export dropped.
REQUESTS_DROPPED_COUNTER = "perfkit.requests.dropped"
SPANS_DROPPED_COUNTER = "perfkit.spans.dropped"


class MetricStore:
    """Histograms keyed by (metric, attributes), plus perfkit's own counters."""

    def __init__(self) -> None:
        self.histograms: dict[MetricKey, Histogram] = {}
        self._stages: dict[str, Histogram] = {}  # a shortcut to the per-stage entries
        self.counters: dict[str, int] = {
            SPANS_DROPPED_COUNTER: 0,
            REQUESTS_DROPPED_COUNTER: 0,
            UNRECORDED_COUNTER: 0,
            _UPSTREAM_UNMEASURED: 0,
            _AUTH_UNMEASURED: 0,
        }
        self._lock = threading.Lock()
        self._gc_pause = self._histogram("perfkit.gc.pause", ())

    def _histogram(self, name: str, attributes: tuple[tuple[str, AttributeValue], ...]) -> Histogram:
        key = (name, attributes)
        histogram = self.histograms.get(key)
        if histogram is None:
            with self._lock:
                histogram = self.histograms[key] = Histogram()
        return histogram

    def observe(self, record: RequestRecord) -> None:
        duration = record.duration_ns
        self._histogram(
            REQUEST_DURATION,
            ((SemConv.HTTP_REQUEST_METHOD, record.method), (SemConv.HTTP_RESPONSE_STATUS_CODE, record.status)),
        ).record(duration)
        if gen_ai_operation(record.path) is not None:
            self._histogram(LLM_REQUEST_DURATION, ((Attr.STREAMING, record.streaming),)).record(duration)
            self._histogram("perfkit.request.overhead", ((Attr.STREAMING, record.streaming),)).record(
                record.overhead_ns
            )
            ttft = record.ttft_ns
            if ttft is not None:
                self._histogram(TIME_TO_FIRST_TOKEN, ()).record(ttft)
        self._gc_pause.record(record.gc_pause_ns)
        if record.attributes:
            attributes = record.attributes
            if attributes.get(Attr.UPSTREAM_UNMEASURED):
                self.counters[_UPSTREAM_UNMEASURED] += 1
            if attributes.get(Attr.AUTH_UNMEASURED):
                self.counters[_AUTH_UNMEASURED] += 1
        stages = self._stages
        weight = record.passed_by + 1  # the stages of a weighted sample: counts estimate every request's
        for entry in record.stages:
            histogram = stages.get(entry.name)
            if histogram is None:
                histogram = stages[entry.name] = self._histogram("perfkit.stage.duration", (("stage", entry.name),))
            histogram.record(entry.duration_ns, weight)

    def snapshot(self) -> list[tuple[MetricKey, Histogram]]:
        with self._lock:
            items = list(self.histograms.items())
        return [(key, histogram.copy()) for key, histogram in items]
