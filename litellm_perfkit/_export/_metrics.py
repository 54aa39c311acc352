"""Histograms over every request (not only sampled ones), aggregated in the
export thread and exported as cumulative OTLP explicit-bucket histograms."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from ..types import AttributeValue, RequestRecord

__all__ = ["Histogram", "MetricStore", "BOUNDARIES_S"]

# Seconds. Fine at the low end: gateway stages are tens of microseconds.
BOUNDARIES_S: tuple[float, ...] = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip

_GEN_AI_SUFFIXES = ("/completions", "/embeddings", "/responses", "/messages")


@dataclass
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BOUNDARIES_S) + 1))
    count: int = 0
    total: float = 0.0
    minimum: float = float("inf")
    maximum: float = float("-inf")

    def record(self, value: float) -> None:
        self.counts[bisect_left(BOUNDARIES_S, value)] += 1
        self.count += 1
        self.total += value
        self.minimum = min(self.minimum, value)
        self.maximum = max(self.maximum, value)


MetricKey = tuple[str, tuple[tuple[str, AttributeValue], ...]]

DESCRIPTIONS: dict[str, str] = {
    "http.server.request.duration": "Time from request received to last response byte.",
    "gen_ai.server.time_to_first_token": "Time from request received to the first content token sent (streams).",
    "gen_ai.server.request.duration": "Time from request received to last response byte, generative AI endpoints.",
    "perfkit.stage.duration": "Duration of one named stage of a request (generator stages: own time).",
}


class MetricStore:
    """Histograms keyed by (metric, attributes), plus perfkit's own counters."""

    def __init__(self) -> None:
        self.histograms: dict[MetricKey, Histogram] = {}
        self.counters: dict[str, int] = {"perfkit.spans.dropped": 0, "perfkit.requests.dropped": 0}

    def _hist(self, name: str, attributes: tuple[tuple[str, AttributeValue], ...]) -> Histogram:
        key = (name, attributes)
        histogram = self.histograms.get(key)
        if histogram is None:
            histogram = self.histograms[key] = Histogram()
        return histogram

    def observe(self, record: RequestRecord) -> None:
        seconds = record.duration_ns / 1e9
        http: tuple[tuple[str, AttributeValue], ...] = (
            ("http.request.method", record.method),
            ("http.response.status_code", record.status),
        )
        self._hist("http.server.request.duration", http).record(seconds)
        if record.path.endswith(_GEN_AI_SUFFIXES):
            streaming = (("perfkit.streaming", record.streaming),)
            self._hist("gen_ai.server.request.duration", streaming).record(seconds)
            ttft = record.ttft_ns
            if ttft is not None:
                self._hist("gen_ai.server.time_to_first_token", ()).record(ttft / 1e9)
        for stage in record.stages:
            self._hist("perfkit.stage.duration", (("stage", stage.name),)).record(stage.duration_ns / 1e9)
