"""The request metric families, from the traffic tally: every request, recorded or not.

A worker's tally (``_core/_traffic``) is cumulative; the export thread ships
all of it when it grew (``traffic_frame``, laid out in ``_core/_layouts``),
and the metrics keep the latest (``Traffic``), so a lost or late frame only
delays the figures. From it come:

- ``perfkit.requests``: a counter by method, route, status code, error type
  and ``perfkit.recorded`` (whether the request has a timeline: spans and
  stage metrics). Summed over ``perfkit.recorded`` it is every request.
- ``perfkit.request.duration`` by method, route, status code and error type;
  ``perfkit.llm_request.duration`` by streaming, and
  ``perfkit.time_to_first_token`` (streams), for the generative-AI routes.

Recorded requests are in the tally once, like the others; the records
(spans, stage and overhead histograms) add nothing to these families.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .._core._layouts import BOUNDARIES_NS, FRAME_HEAD, TRAFFIC_HEAD, TRAFFIC_HEAD_COUNTS, TRAFFIC_SERIES, FrameKind
from .._core._traffic import SeriesKey, Tally, counts_size
from .._wire._names import Attr, Metric, SemConv, gen_ai_operation
from ..types import AttributeValue
from ._metrics import Histogram, MetricStore

__all__ = ["Traffic", "keep", "read_traffic", "requests_sum_json", "traffic_frame"]

REQUESTS_DESCRIPTION = (
    "HTTP requests served, every one, recorded or not (perfkit.recorded: whether it has spans and stage metrics)."
)

Attributes = tuple[tuple[str, AttributeValue], ...]
_BUCKETS = len(BOUNDARIES_NS) + 1
_COUNTS = struct.Struct(f"<{counts_size()}Q")


def traffic_frame(tally: Tally) -> bytes:
    """The whole tally as one frame for the export agent."""
    counts_struct = _COUNTS
    series = tally.series()
    parts = [TRAFFIC_HEAD.pack(tally.requests, len(series))]
    for (method, route, status, error, streaming, recorded), counts in series:
        labels = [method.encode(), route.encode(), error.encode()]
        parts.append(TRAFFIC_SERIES.pack(status, streaming, recorded, *(len(label) for label in labels)))
        parts += labels
        parts.append(counts_struct.pack(*counts))
    payload = b"".join(parts)
    return FRAME_HEAD.pack(FrameKind.TRAFFIC, len(payload)) + payload


def read_traffic(payload: bytes) -> Traffic:
    """A traffic frame's payload, as the metrics keep it."""
    counts_struct = _COUNTS
    requests, count = TRAFFIC_HEAD.unpack_from(payload)
    at = TRAFFIC_HEAD.size
    series: list[tuple[SeriesKey, tuple[int, ...]]] = []
    for _ in range(count):
        status, streaming, recorded, *lengths = TRAFFIC_SERIES.unpack_from(payload, at)
        at += TRAFFIC_SERIES.size
        labels = []
        for length in lengths:
            labels.append(payload[at : at + length].decode())
            at += length
        counts = counts_struct.unpack_from(payload, at)
        at += counts_struct.size
        method, route, error = labels
        series.append(((method, route, status, error, bool(streaming), bool(recorded)), counts))
    return Traffic(requests, series)


def _histogram(counts: tuple[int, ...], at: int, buckets_at: int) -> Histogram:
    histogram = Histogram()
    histogram.count, histogram.total_ns = counts[at], counts[at + 1]
    histogram.minimum_ns, histogram.maximum_ns = counts[at + 2], counts[at + 3]
    histogram.counts = list(counts[buckets_at : buckets_at + _BUCKETS])
    return histogram


def _add(into: dict[tuple[str, Attributes], Histogram], key: tuple[str, Attributes], part: Histogram) -> None:
    histogram = into.get(key)
    if histogram is None:
        into[key] = part
        return
    if part.count:
        if not histogram.count or part.minimum_ns < histogram.minimum_ns:
            histogram.minimum_ns = part.minimum_ns
        histogram.maximum_ns = max(histogram.maximum_ns, part.maximum_ns)
    histogram.count += part.count
    histogram.total_ns += part.total_ns
    histogram.counts = [a + b for a, b in zip(histogram.counts, part.counts, strict=True)]


class Traffic:
    """One worker's tally as last shipped: its series, and the families made of them."""

    __slots__ = ("requests", "series")

    def __init__(self, requests: int = 0, series: list[tuple[SeriesKey, tuple[int, ...]]] | None = None) -> None:
        self.requests = requests
        self.series = series or []

    @classmethod
    def of(cls, tally: Tally) -> Traffic:
        """The tally as it is now (thread mode: no frame in between)."""
        return cls(tally.requests, tally.series())

    def histograms(self) -> list[tuple[tuple[str, Attributes], Histogram]]:
        """The request families' histograms, keyed as ``MetricStore.snapshot``'s."""
        out: dict[tuple[str, Attributes], Histogram] = {}
        for (method, route, status, error, streaming, _recorded), counts in self.series:
            duration = _histogram(counts, 0, TRAFFIC_HEAD_COUNTS)
            attributes: Attributes = (
                (SemConv.HTTP_REQUEST_METHOD, method),
                (SemConv.HTTP_ROUTE, route),
                (SemConv.HTTP_RESPONSE_STATUS_CODE, status),
                (SemConv.ERROR_TYPE, error),
            )
            _add(out, (Metric.REQUEST_DURATION, attributes), duration)
            if gen_ai_operation(route) is not None:
                _add(
                    out,
                    (Metric.LLM_REQUEST_DURATION, ((Attr.STREAMING, streaming),)),
                    _histogram(counts, 0, TRAFFIC_HEAD_COUNTS),
                )
                if counts[4]:
                    _add(out, (Metric.TIME_TO_FIRST_TOKEN, ()), _histogram(counts, 4, TRAFFIC_HEAD_COUNTS + _BUCKETS))
        return list(out.items())

    def counters(self) -> list[tuple[Attributes, int]]:
        """``perfkit.requests``: each series' count, by its labels and whether it was recorded."""
        out: dict[Attributes, int] = {}
        for (method, route, status, error, _streaming, recorded), counts in self.series:
            attributes: Attributes = (
                (SemConv.HTTP_REQUEST_METHOD, method),
                (SemConv.HTTP_ROUTE, route),
                (SemConv.HTTP_RESPONSE_STATUS_CODE, status),
                (SemConv.ERROR_TYPE, error),
                (Attr.RECORDED, "true" if recorded else "false"),
            )
            out[attributes] = out.get(attributes, 0) + counts[0]
        return list(out.items())


def keep(store: MetricStore, traffic: Traffic) -> None:
    """The request families in ``store`` from now on: this tally's (it replaces the last)."""
    store.traffic_histograms = traffic.histograms()
    store.traffic_counters = traffic.counters()


def requests_sum_json(
    store: MetricStore, times: dict[str, str], attributes_json: Callable[[list[tuple[str, AttributeValue]]], Any]
) -> dict[str, Any]:
    """``perfkit.requests`` as an OTLP/JSON cumulative monotonic sum."""
    points = [{"attributes": attributes_json(list(a)), **times, "asInt": str(v)} for a, v in store.traffic_counters]
    return {
        "name": Metric.REQUESTS,
        "description": REQUESTS_DESCRIPTION,
        "unit": "{request}",
        "sum": {"dataPoints": points, "aggregationTemporality": 2, "isMonotonic": True},
    }
