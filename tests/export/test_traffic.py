"""The request families from the traffic tally: its frame, its histograms, perfkit.requests."""

from __future__ import annotations

from typing import Any

import orjson

from litellm_perfkit._core._layouts import FRAME_HEAD, FrameKind
from litellm_perfkit._core._traffic import _PyTally
from litellm_perfkit._export._metrics import MetricStore
from litellm_perfkit._export._otlp import metrics_json
from litellm_perfkit._export._traffic import Traffic, keep, read_traffic, traffic_frame
from litellm_perfkit._wire._names import Metric
from litellm_perfkit.types import RequestRecord
from tests.core.test_traffic import c_tally

CHAT = "/v1/chat/completions"


def fill(tally: Any) -> Any:
    tally.add("POST", CHAT, 200, "", True, True, 40_000_000, 9_000_000)
    tally.add("POST", CHAT, 200, "", True, False, 60_000_000, 11_000_000)
    tally.add("POST", CHAT, 200, "", False, False, 20_000_000, -1)
    tally.add("POST", CHAT, 401, "", False, False, 1_000_000, -1)
    tally.add("GET", "/health", 200, "", False, False, 100_000, -1)
    tally.add("POST", "/v1/chat/completions", 500, "ValueError", False, False, 2_000_000, -1)
    tally.add("POST", "/route/é", 200, "", False, False, 2_000_000, -1)  # UTF-8 labels
    return tally


def test_the_frame_carries_the_whole_tally() -> None:
    for tally in (fill(_PyTally()), fill(c_tally())):
        frame = traffic_frame(tally)
        kind, length = FRAME_HEAD.unpack_from(frame)
        assert kind == FrameKind.TRAFFIC and length == len(frame) - FRAME_HEAD.size
        traffic = read_traffic(frame[FRAME_HEAD.size :])
        assert traffic.requests == 7 and traffic.series == tally.series()


def test_the_families_sum_the_series_every_request_once() -> None:
    store = MetricStore()
    keep(store, Traffic.of(fill(_PyTally())))
    # A recorded request's record adds its stages, not another count.
    store.observe(RequestRecord(start_ns=0, method="POST", path=CHAT, status=200, end_ns=40_000_000))
    histograms = {key: h for key, h in store.snapshot()}
    ok = (
        Metric.REQUEST_DURATION,
        (
            ("http.request.method", "POST"),
            ("http.route", CHAT),
            ("http.response.status_code", 200),
            ("error.type", ""),
        ),
    )
    assert histograms[ok].count == 3  # streaming or not, recorded or not
    assert histograms[ok].minimum_ns == 20_000_000 and histograms[ok].maximum_ns == 60_000_000
    assert sum(h.count for (name, _), h in histograms.items() if name == Metric.REQUEST_DURATION) == 7
    assert histograms[(Metric.LLM_REQUEST_DURATION, (("perfkit.streaming", True),))].count == 2
    assert histograms[(Metric.LLM_REQUEST_DURATION, (("perfkit.streaming", False),))].count == 3
    ttft = histograms[(Metric.TIME_TO_FIRST_TOKEN, ())]
    assert (ttft.count, ttft.total_ns) == (2, 20_000_000)
    counters = dict(store.traffic_counters)
    assert sum(counters.values()) == 7
    recorded = {a: v for a, v in counters.items() if dict(a)["perfkit.recorded"] == "true"}
    assert list(recorded.values()) == [1]


def test_otlp_metrics_carry_perfkit_requests_as_a_monotonic_sum() -> None:
    store = MetricStore()
    keep(store, Traffic.of(fill(_PyTally())))
    body = orjson.loads(metrics_json(store, "svc", {}, 1, 2))
    metrics = {m["name"]: m for m in body["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]}
    requests = metrics["perfkit.requests"]
    assert requests["sum"]["isMonotonic"] and requests["description"]
    assert sum(int(p["asInt"]) for p in requests["sum"]["dataPoints"]) == 7
    durations = metrics["perfkit.request.duration"]["histogram"]["dataPoints"]
    assert sum(int(p["count"]) for p in durations) == 7
