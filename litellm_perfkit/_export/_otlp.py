"""OTLP encoding: spans as OTLP/JSON or protobuf, metrics likewise.

Spans are encoded by hand because this runs for every request: an OTel SDK
span or a protobuf message object costs 10-40 us here, a hand-built one a few.
JSON follows the OTLP/JSON rules (hex ids, 64-bit integers as strings, enum
values as integers, lowerCamelCase keys); protobuf follows
opentelemetry/proto/trace/v1/trace.proto field numbers.
Metrics are encoded once per export interval, so they go through plain dicts
(OTLP/JSON's form), which ``_metrics_protobuf`` turns into protobuf.
"""

from __future__ import annotations

import math
import os
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from .._core._backend import ACTIVE
from .._version import __version__
from .._wire._environment_variables import PERFKIT_APP_PID
from .._wire._names import INSTRUMENTATION_SCOPE, SemConv
from .._wire._protobuf import varint as _varint
from ..types import AttributeValue, StageRecord
from ._metrics import BOUNDARIES_NS, DESCRIPTIONS, MetricStore
from ._metrics_protobuf import encode_metrics_request
from ._spans import STAGE_KEYS, Attributes, Span, StageSpans, _stage_spans_python, hex_ids, stage_span_tuples
from ._split import Split
from ._traffic import requests_sum_json

__all__ = ["encode_stage_spans", "spans_json", "spans_protobuf", "span_json", "metrics_json", "metrics_protobuf"]

# The app's process, not the export agent's (the agent is its child).
_PARENT_PID = int(os.environ.get(PERFKIT_APP_PID, os.getpid()))
# One per worker: each worker has its own export pipeline (thread or agent).
_INSTANCE_ID = str(uuid.uuid4())

# -- JSON --------------------------------------------------------------------

_json_strings: dict[str, str] = {}


def _jstr(value: str) -> str:
    encoded = _json_strings.get(value)
    if encoded is None:
        encoded = orjson.dumps(value).decode()
        if len(_json_strings) < 4096:
            _json_strings[value] = encoded
    return encoded


def _jvalue(value: AttributeValue) -> str:
    if value is True:
        return '{"boolValue":true}'
    if value is False:
        return '{"boolValue":false}'
    if isinstance(value, int):
        return f'{{"intValue":"{value}"}}'
    if isinstance(value, float):
        return f'{{"doubleValue":{value!r}}}' if math.isfinite(value) else f'{{"stringValue":"{value}"}}'
    return f'{{"stringValue":{orjson.dumps(str(value)).decode()}}}'


def _jattributes(attributes: Attributes) -> str:
    return ",".join(f'{{"key":{_jstr(k)},"value":{_jvalue(v)}}}' for k, v in attributes)


def span_json(span: Span) -> str:
    trace_id, span_id, parent, name, kind, start, end, attributes, code, message = span
    parent_field = f'"parentSpanId":"{parent}",' if parent else ""
    status = f'{{"code":{code},"message":{_jstr(message)}}}' if message else f'{{"code":{code}}}'
    return (
        f'{{"traceId":"{trace_id}","spanId":"{span_id}",{parent_field}"name":{_jstr(name)},'
        f'"kind":{kind},"startTimeUnixNano":"{start}","endTimeUnixNano":"{end}",'
        f'"attributes":[{_jattributes(attributes)}],"status":{status}}}'
    )


def _resource_attributes(service_name: str, extra: dict[str, str]) -> Attributes:
    """One value per key: ``OTEL_RESOURCE_ATTRIBUTES`` over perfkit's
    ``service.instance.id`` (one per worker), then what perfkit knows better
    (the service name chosen from OTEL_SERVICE_NAME first, as the spec says;
    the process)."""
    attributes: dict[str, AttributeValue] = {
        SemConv.SERVICE_INSTANCE_ID: _INSTANCE_ID,
        **extra,
        SemConv.SERVICE_NAME: service_name,
        SemConv.PROCESS_PID: _PARENT_PID,
        SemConv.TELEMETRY_SDK_NAME: INSTRUMENTATION_SCOPE,
        SemConv.TELEMETRY_SDK_LANGUAGE: "python",
        SemConv.TELEMETRY_SDK_VERSION: __version__,
    }
    return list(attributes.items())


def _json_span(span: Span | bytes) -> str:
    if isinstance(span, bytes):  # only an exporter whose span_form is "protobuf" is handed these
        raise TypeError("spans already encoded as protobuf cannot be written as OTLP/JSON")
    return span_json(span)


def spans_json(spans: Sequence[Span | bytes], service_name: str, resource: dict[str, str]) -> bytes:
    head = (
        f'{{"resourceSpans":[{{"resource":{{"attributes":[{_jattributes(_resource_attributes(service_name, resource))}]}},'
        f'"scopeSpans":[{{"scope":{{"name":"{INSTRUMENTATION_SCOPE}","version":"{__version__}"}},"spans":['
    )
    return (head + ",".join(map(_json_span, spans)) + "]}]}]}").encode()


# -- protobuf ----------------------------------------------------------------


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]
_LENGTH_DELIMITED_TAGS = [bytes((number << 3 | 2,)) for number in range(16)]


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    size = len(payload)
    if size < 0x80 and number < 16:  # the usual case: one tag byte, one length byte
        return _LENGTH_DELIMITED_TAGS[number] + _ONE_BYTE[size] + payload
    return _varint(number << 3 | 2) + _varint(size) + payload


_DOUBLE = struct.Struct("<Bd").pack  # AnyValue.double_value: field 4, wire type 1
_pack_double = struct.Struct("<d").pack
_pb_keys: dict[str, bytes] = {}
# Most of a span's attributes are doubles under a fixed key, so everything but
# the 8 value bytes is the same every time: (key, field number) -> that prefix.
# Bools and strings (methods, paths, stage kinds, model names) repeat whole:
# (key, value, field number) -> the encoded KeyValue. Both caches are bounded.
_pb_double_prefixes: dict[tuple[str, int], bytes] = {}
_pb_repeated: dict[tuple[str, AttributeValue, int], bytes] = {}
_CACHE_LIMIT = 4096


def _pvalue(value: AttributeValue) -> bytes:
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int64, two's complement
    if isinstance(value, float):
        return _DOUBLE(0x21, value)
    return _field(1, str(value).encode())


def _pkey(key: str) -> bytes:
    """KeyValue.key, encoded (cached)."""
    encoded_key = _pb_keys.get(key)
    if encoded_key is None:
        encoded_key = _field(1, key.encode())
        if len(_pb_keys) < _CACHE_LIMIT:
            _pb_keys[key] = encoded_key
    return encoded_key


def _pkeyvalue(key: str, value: AttributeValue, field_number: int) -> bytes:
    return _field(field_number, _pkey(key) + _field(2, _pvalue(value)))


def _pattributes(attributes: Attributes, field_number: int = 9) -> bytes:
    """KeyValue entries as field ``field_number`` (Span.attributes is 9, Resource.attributes 1)."""
    out = []
    for key, value in attributes:
        kind = type(value)
        if kind is float:
            prefix = _pb_double_prefixes.get((key, field_number))
            if prefix is None:
                prefix = _pkeyvalue(key, 0.0, field_number)[:-8]
                if len(_pb_double_prefixes) < _CACHE_LIMIT:
                    _pb_double_prefixes[(key, field_number)] = prefix
            out.append(prefix + _pack_double(value))
        elif kind is str or kind is bool:
            whole = _pb_repeated.get((key, value, field_number))
            if whole is None:
                whole = _pkeyvalue(key, value, field_number)
                if len(_pb_repeated) < _CACHE_LIMIT:
                    _pb_repeated[(key, value, field_number)] = whole
            out.append(whole)
        elif kind is int:
            value_bytes = b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # type: ignore[operator]
            # AnyValue.int_value is at most 11 bytes: its length is one byte.
            out.append(_field(field_number, _pkey(key) + b"\x12" + _ONE_BYTE[len(value_bytes)] + value_bytes))
        else:
            out.append(_pkeyvalue(key, value, field_number))
    return b"".join(out)


# trace_id (1), span_id (2) as fixed-size bytes; start (7) and end (8) as fixed64.
_IDS = struct.Struct("<BB16sBB8s").pack
_PARENT = struct.Struct("<BB8s").pack
_TIMES = struct.Struct("<BQBQ").pack


def _span_protobuf(span: Span) -> bytes:
    trace_id, span_id, parent, name, kind, start, end, attributes, code, message = span
    body = _IDS(0x0A, 16, bytes.fromhex(trace_id), 0x12, 8, bytes.fromhex(span_id))
    if parent:
        body += _PARENT(0x22, 8, bytes.fromhex(parent))
    status = (_field(2, message.encode()) if message else b"") + (b"\x18" + _varint(code) if code else b"")
    body += (
        _field(5, name.encode())
        + b"\x30"
        + _varint(kind)
        + _TIMES(0x39, start, 0x41, end)
        + _pattributes(attributes)
        + _field(15, status)
    )
    return _field(2, body)  # ScopeSpans.spans


def _spans_protobuf_python(spans: Sequence[Span | bytes]) -> bytes:
    return b"".join(span if isinstance(span, bytes) else _span_protobuf(span) for span in spans)


def _spans_encoder() -> Callable[[Sequence[Span | bytes]], bytes]:
    """The C encoder when the accelerator is built (the Python one where it declines), else Python's."""
    speedups = ACTIVE.speedups
    if speedups is None:
        return _spans_protobuf_python
    encode = speedups.encode_spans

    def encode_spans(spans: Sequence[Span | bytes]) -> bytes:
        encoded: bytes | None = encode(spans if isinstance(spans, list) else list(spans))
        return _spans_protobuf_python(spans) if encoded is None else encoded

    return encode_spans


_encode_spans = _spans_encoder()


def _stage_spans_protobuf_python(
    stages: tuple[StageRecord, ...],
    durations: list[int],
    own: list[int],
    splits: list[Split] | None,
    ids: bytes | list[str],
    trace_id: str,
    server_id: str,
    anchor_ns: int,
    end_ns: int,
    keys: tuple[str, ...],
) -> bytes | None:
    """The stage spans as ScopeSpans.spans fields: the reference for the C accelerator's
    ``stage_spans_protobuf``, which writes them with no span built."""
    return _spans_protobuf_python(
        _stage_spans_python(stages, durations, own, splits, hex_ids(ids), trace_id, server_id, anchor_ns, end_ns, keys)
    )


def _stage_spans_encoder() -> Callable[[StageSpans], bytes]:
    """The C writer when the accelerator is built (the reference where it declines), else the reference."""
    speedups = ACTIVE.speedups
    write = _stage_spans_protobuf_python if speedups is None else speedups.stage_spans_protobuf

    def encode_stage_spans(stages: StageSpans) -> bytes:
        encoded = write(*stages, STAGE_KEYS)
        if encoded is None:  # declined: the reference encodes them (and raises what is wrong)
            encoded = _spans_protobuf_python(stage_span_tuples(stages))
        return encoded

    return encode_stage_spans


encode_stage_spans = _stage_spans_encoder()
"""A request's stage spans (``request_spans``) as OTLP protobuf ScopeSpans.spans fields,
the bytes ``spans_protobuf`` copies as they are: an exporter whose span_form is
"protobuf" is handed these instead of a Span per stage."""


def spans_protobuf(spans: Sequence[Span | bytes], service_name: str, resource: dict[str, str]) -> bytes:
    """A serialized ExportTraceServiceRequest; a bytes item is spans already encoded (``encode_stage_spans``)."""
    scope = _field(1, _field(1, INSTRUMENTATION_SCOPE.encode()) + _field(2, __version__.encode()))
    scope_spans = _field(2, scope + _encode_spans(spans))
    resource_msg = _field(1, _pattributes(_resource_attributes(service_name, resource), field_number=1))
    return _field(1, resource_msg + scope_spans)


# -- metrics -----------------------------------------------------------------


def _attributes_dicts(attributes: Attributes) -> list[dict[str, Any]]:
    return [{"key": k, "value": orjson.loads(_jvalue(v))} for k, v in attributes]


def _metrics_request(
    store: MetricStore, service_name: str, resource: dict[str, str], start_unix_ns: int, now_unix_ns: int
) -> dict[str, Any]:
    times = {"startTimeUnixNano": str(start_unix_ns), "timeUnixNano": str(now_unix_ns)}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for (name, attrs), histogram in store.snapshot():
        by_name.setdefault(name, []).append(
            {
                "attributes": _attributes_dicts(list(attrs)),
                **times,
                "count": str(histogram.count),
                "sum": histogram.total_ns / 1e9,
                # Optional in OTLP: an empty histogram (gc.pause before any request) has neither.
                **({"min": histogram.minimum_ns / 1e9, "max": histogram.maximum_ns / 1e9} if histogram.count else {}),
                "bucketCounts": [str(c) for c in histogram.counts],
                "explicitBounds": [b / 1e9 for b in BOUNDARIES_NS],
            }
        )
    cumulative = 2
    metrics: list[dict[str, Any]] = [
        {
            "name": name,
            "description": DESCRIPTIONS.get(name, ""),
            "unit": "s",
            "histogram": {"dataPoints": points, "aggregationTemporality": cumulative},
        }
        for name, points in by_name.items()
    ]
    for name, value in store.counters.items():
        point = {**times, "asInt": str(value)}
        metrics.append(
            {
                "name": name,
                "unit": "{item}",
                "sum": {"dataPoints": [point], "aggregationTemporality": cumulative, "isMonotonic": True},
            }
        )
    if store.traffic_counters:
        metrics.append(requests_sum_json(store, times, _attributes_dicts))
    return {
        "resourceMetrics": [
            {
                "resource": {"attributes": _attributes_dicts(_resource_attributes(service_name, resource))},
                "scopeMetrics": [
                    {"scope": {"name": INSTRUMENTATION_SCOPE, "version": __version__}, "metrics": metrics}
                ],
            }
        ]
    }


def metrics_json(
    store: MetricStore, service_name: str, resource: dict[str, str], start_unix_ns: int, now_unix_ns: int
) -> bytes:
    return orjson.dumps(_metrics_request(store, service_name, resource, start_unix_ns, now_unix_ns))


def metrics_protobuf(
    store: MetricStore, service_name: str, resource: dict[str, str], start_unix_ns: int, now_unix_ns: int
) -> bytes:
    """A serialized ExportMetricsServiceRequest: the same request as ``metrics_json``, in protobuf."""
    return encode_metrics_request(_metrics_request(store, service_name, resource, start_unix_ns, now_unix_ns))
