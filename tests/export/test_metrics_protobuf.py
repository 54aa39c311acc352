"""perfkit's OTLP metrics encoder against opentelemetry-proto's (protobuf's own
serializer): the same bytes for random requests over the whole metrics schema,
and for what the metric store exports; and it runs without google.protobuf."""

from __future__ import annotations

import base64
import copy
import math
import random
import subprocess
import sys
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from litellm_perfkit._core._traffic import _PyTally
from litellm_perfkit._export._metrics import MetricStore
from litellm_perfkit._export._metrics_protobuf import encode_metrics_request
from litellm_perfkit._export._otlp import _metrics_request, metrics_protobuf
from litellm_perfkit._export._traffic import Traffic, keep
from litellm_perfkit.types import RequestRecord, StageRecord

U64 = (1 << 64) - 1


def protobufs(request: dict[str, Any]) -> bytes:
    """opentelemetry-proto's encoding of an OTLP/JSON request (its trace and
    span ids are hex; protobuf's JSON mapping wants base64)."""
    proto_json = copy.deepcopy(request)
    for resource in proto_json.get("resourceMetrics", []):
        for scope in resource.get("scopeMetrics", []):
            for metric in scope.get("metrics", []):
                for kind in ("gauge", "sum", "histogram", "exponentialHistogram", "summary"):
                    for point in metric.get(kind, {}).get("dataPoints", []):
                        for exemplar in point.get("exemplars", []):
                            for key in ("traceId", "spanId"):
                                if key in exemplar:
                                    exemplar[key] = base64.b64encode(bytes.fromhex(exemplar[key])).decode()
    return bytes(json_format.ParseDict(proto_json, ExportMetricsServiceRequest()).SerializeToString())


class Requests:
    """Random OTLP/JSON metrics requests: every message type, zero and extreme values."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def chance(self) -> bool:
        return self.r.random() < 0.5

    def uint(self, bits: int = 64) -> int | str:
        value = self.r.choice([0, 1, 127, 128, 300, (1 << bits) - 1, self.r.getrandbits(bits)])
        return str(value) if self.chance() else value

    def sint(self, bits: int) -> int | str:
        value = self.r.choice([0, 1, -1, 63, -64, 64, -(1 << (bits - 1)), (1 << (bits - 1)) - 1])
        if bits == 64 and self.chance():
            return str(value)
        return value

    def double(self) -> float | str:
        values: list[float | str] = [0.0, -0.0, 1.5, -2.25e-9, 1e300, 7, "2.5", self.r.random(), "NaN", "Infinity"]
        return self.r.choice([*values, "-Infinity"])

    def string(self) -> str:
        return self.r.choice(["", "a", "perfkit.stage.duration", "é ünïcödé ✓", "x" * 200])

    def any_value(self, depth: int = 0) -> dict[str, Any]:
        kinds = ["stringValue", "boolValue", "intValue", "doubleValue", "bytesValue"]
        if depth < 2:
            kinds += ["arrayValue", "kvlistValue"]
        kind = self.r.choice(kinds)
        if kind == "stringValue":
            return {kind: self.string()}
        if kind == "boolValue":
            return {kind: self.chance()}
        if kind == "intValue":
            return {kind: self.sint(64)}
        if kind == "doubleValue":
            return {kind: self.double()}
        if kind == "bytesValue":
            return {kind: base64.b64encode(self.r.randbytes(self.r.choice([0, 3, 16]))).decode()}
        if kind == "arrayValue":
            return {kind: {"values": [self.any_value(depth + 1) for _ in range(self.r.randint(0, 3))]}}
        return {kind: {"values": self.attributes(depth + 1)}}

    def attributes(self, depth: int = 0) -> list[dict[str, Any]]:
        return [{"key": self.string(), "value": self.any_value(depth)} for _ in range(self.r.randint(0, 3))]

    def common(self) -> dict[str, Any]:
        point: dict[str, Any] = {"attributes": self.attributes(), "timeUnixNano": self.uint()}
        if self.chance():
            point["startTimeUnixNano"] = self.uint()
        if self.chance():
            point["flags"] = self.uint(32)
        return point

    def exemplars(self) -> list[dict[str, Any]]:
        out = []
        for _ in range(self.r.randint(0, 2)):
            exemplar: dict[str, Any] = {"timeUnixNano": self.uint(), "filteredAttributes": self.attributes()}
            if self.chance():
                exemplar["asInt"] = self.sint(64)
            else:
                exemplar["asDouble"] = self.double()
            if self.chance():
                exemplar["traceId"], exemplar["spanId"] = self.r.randbytes(16).hex(), self.r.randbytes(8).hex()
            out.append(exemplar)
        return out

    def number_point(self) -> dict[str, Any]:
        point = self.common()
        if self.chance():
            point["asInt"] = self.sint(64)
        else:
            point["asDouble"] = self.double()
        point["exemplars"] = self.exemplars()
        return point

    def optional_stats(self, point: dict[str, Any]) -> dict[str, Any]:
        for key in ("sum", "min", "max"):
            if self.chance():
                point[key] = self.double()
        return point

    def histogram_point(self) -> dict[str, Any]:
        bounds = sorted(self.r.random() for _ in range(self.r.randint(0, 5)))
        point = {
            **self.common(),
            "count": self.uint(),
            "bucketCounts": [self.uint() for _ in range(len(bounds) + 1)] if bounds or self.chance() else [],
            "explicitBounds": bounds,
            "exemplars": self.exemplars(),
        }
        return self.optional_stats(point)

    def buckets(self) -> dict[str, Any]:
        return {"offset": self.sint(32), "bucketCounts": [self.uint() for _ in range(self.r.randint(0, 4))]}

    def exponential_point(self) -> dict[str, Any]:
        point = {**self.common(), "count": self.uint(), "scale": self.sint(32), "zeroCount": self.uint()}
        for key in ("positive", "negative"):
            if self.chance():
                point[key] = self.buckets()
        if self.chance():
            point["zeroThreshold"] = self.double()
        point["exemplars"] = self.exemplars()
        return self.optional_stats(point)

    def summary_point(self) -> dict[str, Any]:
        quantiles = [{"quantile": self.r.random(), "value": self.double()} for _ in range(self.r.randint(0, 3))]
        return {**self.common(), "count": self.uint(), "sum": self.double(), "quantileValues": quantiles}

    def temporality(self) -> int | str:
        values: list[int | str] = [0, 1, 2, "AGGREGATION_TEMPORALITY_DELTA", "AGGREGATION_TEMPORALITY_CUMULATIVE"]
        return self.r.choice(values)

    def metric(self) -> dict[str, Any]:
        metric: dict[str, Any] = {"name": self.string(), "description": self.string(), "unit": self.string()}
        if self.chance():
            metric["metadata"] = self.attributes()
        points = range(self.r.randint(0, 3))
        kind = self.r.choice(["gauge", "sum", "histogram", "exponentialHistogram", "summary"])
        if kind == "gauge":
            metric[kind] = {"dataPoints": [self.number_point() for _ in points]}
        elif kind == "sum":
            data = {"dataPoints": [self.number_point() for _ in points], "aggregationTemporality": self.temporality()}
            metric[kind] = {**data, "isMonotonic": self.chance()}
        elif kind == "histogram":
            data = {"dataPoints": [self.histogram_point() for _ in points]}
            metric[kind] = {**data, "aggregationTemporality": self.temporality()}
        elif kind == "exponentialHistogram":
            data = {"dataPoints": [self.exponential_point() for _ in points]}
            metric[kind] = {**data, "aggregationTemporality": self.temporality()}
        else:
            metric[kind] = {"dataPoints": [self.summary_point() for _ in points]}
        return metric

    def request(self) -> dict[str, Any]:
        resources = []
        for _ in range(self.r.randint(1, 2)):
            resource: dict[str, Any] = {"scopeMetrics": []}
            if self.chance():
                resource["resource"] = {"attributes": self.attributes(), "droppedAttributesCount": self.uint(32)}
            if self.chance():
                resource["schemaUrl"] = self.string()
            for _ in range(self.r.randint(0, 2)):
                scope: dict[str, Any] = {"metrics": [self.metric() for _ in range(self.r.randint(0, 4))]}
                if self.chance():
                    scope["scope"] = {"name": self.string(), "version": self.string(), "attributes": self.attributes()}
                if self.chance():
                    scope["schemaUrl"] = self.string()
                resource["scopeMetrics"].append(scope)
            resources.append(resource)
        return {"resourceMetrics": resources}


@pytest.mark.parametrize("seed", range(300))
def test_random_requests_encode_as_protobufs_own_encoder_does(seed: int) -> None:
    request = Requests(seed).request()
    assert encode_metrics_request(request) == protobufs(request)


def stored_metrics() -> MetricStore:
    """Five recorded requests (their stages) and the tally of every request, 12 of them."""
    store = MetricStore()
    tally = _PyTally()
    for i, status in enumerate((200, 200, 404, 500, 200)):
        start = i * 10_000_000
        auth = StageRecord(name="auth", start_ns=start, end_ns=start + 100_000, parent=-1)
        store.observe(
            RequestRecord(
                start_ns=start,
                method="POST",
                path="/v1/chat/completions",
                status=status,
                end_ns=start + 1_000_000 * (i + 1),
                stages=(auth,),
            )
        )
        tally.add("POST", "/v1/chat/completions", status, "", False, True, 1_000_000 * (i + 1), -1)
    for _ in range(7):  # passed by unrecorded
        tally.add("POST", "/v1/chat/completions", 200, "", False, False, 1_000_000, -1)
    keep(store, Traffic.of(tally))
    return store


def test_what_the_store_exports_is_what_protobuf_encodes() -> None:
    store = stored_metrics()
    request = _metrics_request(store, "svc", {"deployment.environment": "test"}, 1_000, 2_000)
    assert metrics_protobuf(store, "svc", {"deployment.environment": "test"}, 1_000, 2_000) == protobufs(request)
    decoded = ExportMetricsServiceRequest.FromString(metrics_protobuf(store, "svc", {}, 1_000, 2_000))
    metrics = {m.name: m for m in decoded.resource_metrics[0].scope_metrics[0].metrics}
    points = metrics["perfkit.request.duration"].histogram.data_points
    assert sum(p.count for p in points) == 12 and math.isclose(sum(p.sum for p in points), 0.022)
    assert sum(p.as_int for p in metrics["perfkit.requests"].sum.data_points) == 12
    assert sum(p.count for p in metrics["perfkit.stage.duration"].histogram.data_points) == 5


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            {"resourceMetrics": [{"scopeMetric": []}]},
            "request.resourceMetrics[0]: ResourceMetrics has no field 'scopeMetric'",
        ),
        ({"resourceMetrics": {}}, "request.resourceMetrics: expected a list"),
        (
            {"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"sum": {}, "gauge": {}}]}]}]},
            "metrics[0]: a Metric holds one value, got gauge and sum",
        ),
        (
            {"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"sum": {"dataPoints": [{"asInt": 1.5}]}}]}]}]},
            "request.resourceMetrics[0].scopeMetrics[0].metrics[0].sum.dataPoints[0].asInt: expected an integer",
        ),
        (
            {"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"histogram": {"dataPoints": [{"count": -1}]}}]}]}]},
            "count: expected an integer in [0, 18446744073709551615], got -1",
        ),
    ],
)
def test_a_request_outside_the_schema_is_an_error_naming_the_field(request_: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        encode_metrics_request(request_)
    assert message in str(raised.value)


@pytest.mark.integration  # another interpreter
def test_metrics_encode_without_google_protobuf() -> None:
    script = (
        "import sys; sys.modules['google'] = None; sys.modules['google.protobuf'] = None\n"
        "from litellm_perfkit._export._metrics import MetricStore\n"
        "from litellm_perfkit._export._otlp import metrics_protobuf\n"
        "print(len(metrics_protobuf(MetricStore(), 'svc', {}, 1, 2)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 100


def test_an_empty_histogram_has_no_min_or_max() -> None:
    decoded = ExportMetricsServiceRequest.FromString(metrics_protobuf(MetricStore(), "svc", {}, 1, 2))
    [gc_pause] = [m for m in decoded.resource_metrics[0].scope_metrics[0].metrics if m.name == "perfkit.gc.pause"]
    [point] = gc_pause.histogram.data_points
    assert point.count == 0 and not point.HasField("min") and not point.HasField("max")
