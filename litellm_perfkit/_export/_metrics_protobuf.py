"""OTLP metrics in protobuf, perfkit's own encoder (no ``google.protobuf``).

It encodes an ExportMetricsServiceRequest from its OTLP/JSON form, the dict
``_otlp`` builds for http/json, so both encodings carry the same metrics
whatever instruments the metric store holds: gauges, sums, histograms,
exponential histograms and summaries, with exemplars and any attribute value.
Field numbers and types follow opentelemetry/proto/metrics/v1/metrics.proto,
common/v1/common.proto and resource/v1/resource.proto (proto3: a field with
implicit presence is left out at its zero value; a ``oneof`` or ``optional``
field is written whenever it is set). Fields go out in field-number order, as
protobuf's own encoder writes them, so the bytes can be compared with it
(tests/export/test_metrics_protobuf.py).

OTLP/JSON's rules for the input: 64-bit integers as numbers or decimal
strings, doubles as numbers, decimal strings or ``"NaN"``/``"Infinity"``/``"-Infinity"``,
enums as numbers or names, trace and span ids in hex, other bytes in base64.
A key the schema does not have is an error (ValueError), never dropped.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Mapping
from typing import Any

from .._wire._protobuf import varint as _varint

__all__ = ["encode_metrics_request"]

# A field's kind: how its value is written, and whether a zero value is written.
_STRING, _BYTES, _HEX_BYTES = "string", "bytes", "hex_bytes"
_BOOL, _ENUM, _UINT32, _INT64, _SINT32 = "bool", "enum", "uint32", "int64", "sint32"
_FIXED64, _SFIXED64, _DOUBLE = "fixed64", "sfixed64", "double"
_MESSAGE, _MESSAGES = "message", "messages"
_PACKED_FIXED64, _PACKED_UINT64, _PACKED_DOUBLE = "packed_fixed64", "packed_uint64", "packed_double"

# field's JSON name -> (number, kind, always written when set (oneof/optional/message), message type)
_Field = tuple[int, str, bool, str]
_SCHEMA: dict[str, dict[str, _Field]] = {
    "ExportMetricsServiceRequest": {"resourceMetrics": (1, _MESSAGES, False, "ResourceMetrics")},
    "ResourceMetrics": {
        "resource": (1, _MESSAGE, True, "Resource"),
        "scopeMetrics": (2, _MESSAGES, False, "ScopeMetrics"),
        "schemaUrl": (3, _STRING, False, ""),
    },
    "Resource": {
        "attributes": (1, _MESSAGES, False, "KeyValue"),
        "droppedAttributesCount": (2, _UINT32, False, ""),
    },
    "ScopeMetrics": {
        "scope": (1, _MESSAGE, True, "InstrumentationScope"),
        "metrics": (2, _MESSAGES, False, "Metric"),
        "schemaUrl": (3, _STRING, False, ""),
    },
    "InstrumentationScope": {
        "name": (1, _STRING, False, ""),
        "version": (2, _STRING, False, ""),
        "attributes": (3, _MESSAGES, False, "KeyValue"),
        "droppedAttributesCount": (4, _UINT32, False, ""),
    },
    "Metric": {
        "name": (1, _STRING, False, ""),
        "description": (2, _STRING, False, ""),
        "unit": (3, _STRING, False, ""),
        # oneof data
        "gauge": (5, _MESSAGE, True, "Gauge"),
        "sum": (7, _MESSAGE, True, "Sum"),
        "histogram": (9, _MESSAGE, True, "Histogram"),
        "exponentialHistogram": (10, _MESSAGE, True, "ExponentialHistogram"),
        "summary": (11, _MESSAGE, True, "Summary"),
        "metadata": (12, _MESSAGES, False, "KeyValue"),
    },
    "Gauge": {"dataPoints": (1, _MESSAGES, False, "NumberDataPoint")},
    "Sum": {
        "dataPoints": (1, _MESSAGES, False, "NumberDataPoint"),
        "aggregationTemporality": (2, _ENUM, False, ""),
        "isMonotonic": (3, _BOOL, False, ""),
    },
    "Histogram": {
        "dataPoints": (1, _MESSAGES, False, "HistogramDataPoint"),
        "aggregationTemporality": (2, _ENUM, False, ""),
    },
    "ExponentialHistogram": {
        "dataPoints": (1, _MESSAGES, False, "ExponentialHistogramDataPoint"),
        "aggregationTemporality": (2, _ENUM, False, ""),
    },
    "Summary": {"dataPoints": (1, _MESSAGES, False, "SummaryDataPoint")},
    "NumberDataPoint": {
        "startTimeUnixNano": (2, _FIXED64, False, ""),
        "timeUnixNano": (3, _FIXED64, False, ""),
        "asDouble": (4, _DOUBLE, True, ""),  # oneof value
        "exemplars": (5, _MESSAGES, False, "Exemplar"),
        "asInt": (6, _SFIXED64, True, ""),  # oneof value
        "attributes": (7, _MESSAGES, False, "KeyValue"),
        "flags": (8, _UINT32, False, ""),
    },
    "HistogramDataPoint": {
        "startTimeUnixNano": (2, _FIXED64, False, ""),
        "timeUnixNano": (3, _FIXED64, False, ""),
        "count": (4, _FIXED64, False, ""),
        "sum": (5, _DOUBLE, True, ""),  # optional
        "bucketCounts": (6, _PACKED_FIXED64, False, ""),
        "explicitBounds": (7, _PACKED_DOUBLE, False, ""),
        "exemplars": (8, _MESSAGES, False, "Exemplar"),
        "attributes": (9, _MESSAGES, False, "KeyValue"),
        "flags": (10, _UINT32, False, ""),
        "min": (11, _DOUBLE, True, ""),  # optional
        "max": (12, _DOUBLE, True, ""),  # optional
    },
    "ExponentialHistogramDataPoint": {
        "attributes": (1, _MESSAGES, False, "KeyValue"),
        "startTimeUnixNano": (2, _FIXED64, False, ""),
        "timeUnixNano": (3, _FIXED64, False, ""),
        "count": (4, _FIXED64, False, ""),
        "sum": (5, _DOUBLE, True, ""),  # optional
        "scale": (6, _SINT32, False, ""),
        "zeroCount": (7, _FIXED64, False, ""),
        "positive": (8, _MESSAGE, True, "Buckets"),
        "negative": (9, _MESSAGE, True, "Buckets"),
        "flags": (10, _UINT32, False, ""),
        "exemplars": (11, _MESSAGES, False, "Exemplar"),
        "min": (12, _DOUBLE, True, ""),  # optional
        "max": (13, _DOUBLE, True, ""),  # optional
        "zeroThreshold": (14, _DOUBLE, False, ""),
    },
    "Buckets": {"offset": (1, _SINT32, False, ""), "bucketCounts": (2, _PACKED_UINT64, False, "")},
    "SummaryDataPoint": {
        "startTimeUnixNano": (2, _FIXED64, False, ""),
        "timeUnixNano": (3, _FIXED64, False, ""),
        "count": (4, _FIXED64, False, ""),
        "sum": (5, _DOUBLE, False, ""),
        "quantileValues": (6, _MESSAGES, False, "ValueAtQuantile"),
        "attributes": (7, _MESSAGES, False, "KeyValue"),
        "flags": (8, _UINT32, False, ""),
    },
    "ValueAtQuantile": {"quantile": (1, _DOUBLE, False, ""), "value": (2, _DOUBLE, False, "")},
    "Exemplar": {
        "timeUnixNano": (2, _FIXED64, False, ""),
        "asDouble": (3, _DOUBLE, True, ""),  # oneof value
        "spanId": (4, _HEX_BYTES, False, ""),
        "traceId": (5, _HEX_BYTES, False, ""),
        "asInt": (6, _SFIXED64, True, ""),  # oneof value
        "filteredAttributes": (7, _MESSAGES, False, "KeyValue"),
    },
    "KeyValue": {"key": (1, _STRING, False, ""), "value": (2, _MESSAGE, True, "AnyValue")},
    "AnyValue": {  # oneof value: each written when set, zero included
        "stringValue": (1, _STRING, True, ""),
        "boolValue": (2, _BOOL, True, ""),
        "intValue": (3, _INT64, True, ""),
        "doubleValue": (4, _DOUBLE, True, ""),
        "arrayValue": (5, _MESSAGE, True, "ArrayValue"),
        "kvlistValue": (6, _MESSAGE, True, "KeyValueList"),
        "bytesValue": (7, _BYTES, True, ""),
    },
    "ArrayValue": {"values": (1, _MESSAGES, False, "AnyValue")},
    "KeyValueList": {"values": (1, _MESSAGES, False, "KeyValue")},
}
# Each message's fields in field-number order, the order they are written in.
_ORDERED = {name: sorted(fields.items(), key=lambda item: item[1][0]) for name, fields in _SCHEMA.items()}
_ONEOFS = {"Metric": ("gauge", "sum", "histogram", "exponentialHistogram", "summary")}
_AGGREGATION_TEMPORALITY = {
    "AGGREGATION_TEMPORALITY_UNSPECIFIED": 0,
    "AGGREGATION_TEMPORALITY_DELTA": 1,
    "AGGREGATION_TEMPORALITY_CUMULATIVE": 2,
}

_pack_double = struct.Struct("<d").pack
_pack_fixed64 = struct.Struct("<Q").pack
_pack_sfixed64 = struct.Struct("<q").pack
_WIRE_VARINT, _WIRE_FIXED64, _WIRE_LENGTH = 0, 1, 2


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _tag(number, _WIRE_LENGTH) + _varint(len(payload)) + payload


def _integer(value: Any, where: str, low: int, high: int) -> int:
    """A JSON integer: a number or its decimal string, within [low, high]."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ValueError(f"{where}: expected an integer, got {value!r}") from None
    if not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{where}: expected an integer in [{low}, {high}], got {value!r}")
    return value


_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _not_a_number(value: Any, where: str) -> float:
    raise ValueError(f"{where}: expected a number, got {value!r}")


def _double(value: Any, where: str) -> float:
    if isinstance(value, str):
        if value in _SPECIAL_DOUBLES:
            return _SPECIAL_DOUBLES[value]
        try:
            return float(value) if value.strip() == value and value[-1:].isdigit() else _not_a_number(value, where)
        except ValueError:
            return _not_a_number(value, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: expected a number, got {value!r}")
    return float(value)


_UINT32_MAX, _UINT64_MAX = (1 << 32) - 1, (1 << 64) - 1
_INT32_RANGE = (-(1 << 31), (1 << 31) - 1)
_INT64_RANGE = (-(1 << 63), (1 << 63) - 1)


def _scalar(kind: str, value: Any, where: str) -> tuple[int, bytes, bool]:
    """(wire type, encoded value, whether it is the zero value)."""
    if kind == _STRING:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        encoded = value.encode()
        return _WIRE_LENGTH, _varint(len(encoded)) + encoded, not encoded
    if kind in (_BYTES, _HEX_BYTES):
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        try:
            raw = bytes.fromhex(value) if kind == _HEX_BYTES else base64.b64decode(value, validate=True)
        except ValueError:
            raise ValueError(f"{where}: expected {'hex' if kind == _HEX_BYTES else 'base64'}, got {value!r}") from None
        return _WIRE_LENGTH, _varint(len(raw)) + raw, not raw
    if kind == _BOOL:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {value!r}")
        return _WIRE_VARINT, b"\x01" if value else b"\x00", not value
    if kind == _ENUM:
        number = _AGGREGATION_TEMPORALITY.get(value, value) if isinstance(value, str) else value
        number = _integer(number, where, *_INT32_RANGE)
        return _WIRE_VARINT, _varint(number & _UINT64_MAX), number == 0
    if kind == _UINT32:
        number = _integer(value, where, 0, _UINT32_MAX)
        return _WIRE_VARINT, _varint(number), number == 0
    if kind == _INT64:
        number = _integer(value, where, *_INT64_RANGE)
        return _WIRE_VARINT, _varint(number & _UINT64_MAX), number == 0  # two's complement, 10 bytes when < 0
    if kind == _SINT32:
        number = _integer(value, where, *_INT32_RANGE)
        return _WIRE_VARINT, _varint(((number << 1) ^ (number >> 31)) & _UINT32_MAX), number == 0  # zigzag
    if kind == _FIXED64:
        number = _integer(value, where, 0, _UINT64_MAX)
        return _WIRE_FIXED64, _pack_fixed64(number), number == 0
    if kind == _SFIXED64:
        number = _integer(value, where, *_INT64_RANGE)
        return _WIRE_FIXED64, _pack_sfixed64(number), number == 0
    if kind == _DOUBLE:
        encoded = _pack_double(_double(value, where))
        return _WIRE_FIXED64, encoded, encoded == b"\x00" * 8  # -0.0 is not the zero value
    raise AssertionError(kind)


def _packed(kind: str, values: Any, where: str) -> bytes:
    if not isinstance(values, list):
        raise ValueError(f"{where}: expected a list, got {values!r}")
    if kind == _PACKED_DOUBLE:
        return b"".join(_pack_double(_double(v, where)) for v in values)
    if kind == _PACKED_FIXED64:
        return b"".join(_pack_fixed64(_integer(v, where, 0, _UINT64_MAX)) for v in values)
    return b"".join(_varint(_integer(v, where, 0, _UINT64_MAX)) for v in values)


def _message(type_name: str, value: Any, where: str) -> bytes:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object ({type_name}), got {value!r}")
    fields = _SCHEMA[type_name]
    unknown = [key for key in value if key not in fields]
    if unknown:
        raise ValueError(f"{where}: {type_name} has no field {unknown[0]!r}")
    oneof = [key for key in _ONEOFS.get(type_name, ()) if key in value]
    if len(oneof) > 1 or (type_name == "AnyValue" and len(value) > 1):
        raise ValueError(f"{where}: a {type_name} holds one value, got {' and '.join(oneof or value)}")
    out: list[bytes] = []
    for name, (number, kind, always, nested) in _ORDERED[type_name]:
        if name not in value:
            continue
        item, at = value[name], f"{where}.{name}"
        if kind == _MESSAGE:
            out.append(_length_delimited(number, _message(nested, item, at)))
        elif kind == _MESSAGES:
            if not isinstance(item, list):
                raise ValueError(f"{at}: expected a list, got {item!r}")
            out.extend(
                _length_delimited(number, _message(nested, element, f"{at}[{i}]")) for i, element in enumerate(item)
            )
        elif kind in (_PACKED_FIXED64, _PACKED_UINT64, _PACKED_DOUBLE):
            payload = _packed(kind, item, at)
            if payload:
                out.append(_length_delimited(number, payload))
        else:
            wire_type, encoded, zero = _scalar(kind, item, at)
            if always or not zero:
                out.append(_tag(number, wire_type) + encoded)
    return b"".join(out)


def encode_metrics_request(request: Mapping[str, Any]) -> bytes:
    """A serialized ExportMetricsServiceRequest from its OTLP/JSON form."""
    return _message("ExportMetricsServiceRequest", request, "request")
