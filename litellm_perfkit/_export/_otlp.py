"""OTLP encoding of spans and metrics: the OTLP/JSON mapping, and protobuf.

One neutral form (SpanData, MetricStore) and two wire formats. JSON follows the
OTLP spec's JSON rules: hex trace/span ids, 64-bit integers as strings, enum
values as integers, lowerCamelCase keys.
"""

from __future__ import annotations

from typing import Any

import orjson

from .._version import __version__
from ..types import AttributeValue
from ._metrics import BOUNDARIES_S, DESCRIPTIONS, MetricStore
from ._spans import SpanData

__all__ = ["spans_json", "metrics_json", "spans_protobuf", "metrics_protobuf", "span_dict", "json_to_protobuf"]

_SCOPE = {"name": "litellm_perfkit", "version": __version__}
_AGGREGATION_CUMULATIVE = 2


def _any_value(value: AttributeValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(attributes: dict[str, AttributeValue]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _any_value(value)} for key, value in attributes.items()]


def _resource(service_name: str, extra: dict[str, str]) -> dict[str, Any]:
    attributes: dict[str, AttributeValue] = {
        **extra,
        "service.name": service_name,
        "telemetry.sdk.name": "litellm_perfkit",
        "telemetry.sdk.language": "python",
        "telemetry.sdk.version": __version__,
    }
    return {"attributes": _attributes(attributes)}


def span_dict(span: SpanData) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_unix_ns),
        "endTimeUnixNano": str(span.end_unix_ns),
        "attributes": _attributes(span.attributes),
        "status": {"code": span.status_code, "message": span.status_message}
        if span.status_message
        else {"code": span.status_code},
    }
    if span.parent_span_id:
        encoded["parentSpanId"] = span.parent_span_id
    return encoded


def _spans_request(spans: list[SpanData], service_name: str, resource: dict[str, str]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": _resource(service_name, resource),
                "scopeSpans": [{"scope": _SCOPE, "spans": [span_dict(s) for s in spans]}],
            }
        ]
    }


def spans_json(spans: list[SpanData], service_name: str, resource: dict[str, str]) -> bytes:
    return orjson.dumps(_spans_request(spans, service_name, resource))


def _metrics_request(
    store: MetricStore, service_name: str, resource: dict[str, str], start_unix_ns: int, now_unix_ns: int
) -> dict[str, Any]:
    by_name: dict[str, list[dict[str, Any]]] = {}
    for (name, attrs), histogram in store.histograms.items():
        by_name.setdefault(name, []).append(
            {
                "attributes": _attributes(dict(attrs)),
                "startTimeUnixNano": str(start_unix_ns),
                "timeUnixNano": str(now_unix_ns),
                "count": str(histogram.count),
                "sum": histogram.total,
                "min": histogram.minimum,
                "max": histogram.maximum,
                "bucketCounts": [str(c) for c in histogram.counts],
                "explicitBounds": list(BOUNDARIES_S),
            }
        )
    metrics: list[dict[str, Any]] = [
        {
            "name": name,
            "description": DESCRIPTIONS.get(name, ""),
            "unit": "s",
            "histogram": {"dataPoints": points, "aggregationTemporality": _AGGREGATION_CUMULATIVE},
        }
        for name, points in by_name.items()
    ]
    for name, value in store.counters.items():
        metrics.append(
            {
                "name": name,
                "unit": "{item}",
                "sum": {
                    "dataPoints": [
                        {"startTimeUnixNano": str(start_unix_ns), "timeUnixNano": str(now_unix_ns), "asInt": str(value)}
                    ],
                    "aggregationTemporality": _AGGREGATION_CUMULATIVE,
                    "isMonotonic": True,
                },
            }
        )
    return {
        "resourceMetrics": [
            {"resource": _resource(service_name, resource), "scopeMetrics": [{"scope": _SCOPE, "metrics": metrics}]}
        ]
    }


def metrics_json(
    store: MetricStore, service_name: str, resource: dict[str, str], start_unix_ns: int, now_unix_ns: int
) -> bytes:
    return orjson.dumps(_metrics_request(store, service_name, resource, start_unix_ns, now_unix_ns))


def json_to_protobuf(request: dict[str, Any], message: Any) -> Any:
    """Fill a protobuf OTLP request from its OTLP/JSON form.

    protobuf's own JSON parser reads ``bytes`` fields as base64, while OTLP/JSON
    writes trace and span ids as hex, so the ids are converted first.
    """
    from google.protobuf import json_format

    def fix_ids(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: (_hex_to_base64(value) if key in ("traceId", "spanId", "parentSpanId") else fix_ids(value))
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [fix_ids(item) for item in node]
        return node

    return json_format.ParseDict(fix_ids(request), message)


def _hex_to_base64(value: str) -> str:
    import base64

    return base64.b64encode(bytes.fromhex(value)).decode("ascii")


def spans_protobuf(spans: list[SpanData], service_name: str, resource: dict[str, str]) -> Any:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return json_to_protobuf(_spans_request(spans, service_name, resource), ExportTraceServiceRequest())


def metrics_protobuf(
    store: MetricStore, service_name: str, resource: dict[str, str], start_unix_ns: int, now_unix_ns: int
) -> Any:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    request = _metrics_request(store, service_name, resource, start_unix_ns, now_unix_ns)
    return json_to_protobuf(request, ExportMetricsServiceRequest())
