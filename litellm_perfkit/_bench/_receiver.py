"""An embedded OTLP/HTTP receiver on 127.0.0.1 for the bench.

The proxy under test exports its spans here; the bench joins them to its own
client records by trace id. It takes both OTLP/HTTP encodings: protobuf, which
perfkit and the OTel SDKs export by default (so the bench measures the proxy
as users run it), and JSON. A request's body is only kept when it arrives:
decoding waits for ``take``, after a phase, so that it does not compete with
the load driver while the phase is measured.
"""

from __future__ import annotations

import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from .._wire._names import JSON_CONTENT_TYPE, SemConv
from .._wire._protobuf import fields

__all__ = ["SpanReceiver", "decode_json", "decode_protobuf"]

ReceivedSpan = dict[str, Any]
_PROTOBUF = "application/x-protobuf"
_JSON = JSON_CONTENT_TYPE
_DOUBLE = struct.Struct("<d").unpack


def _value(v: dict[str, Any]) -> Any:
    raw = next(iter(v.values()), None)
    return int(raw) if "intValue" in v and raw is not None else raw


def decode_json(body: bytes) -> list[ReceivedSpan]:
    """The spans of an OTLP/JSON ExportTraceServiceRequest."""
    spans = []
    for resource_spans in orjson.loads(body).get("resourceSpans", []):
        resource = {a["key"]: _value(a["value"]) for a in resource_spans.get("resource", {}).get("attributes", [])}
        for scope in resource_spans.get("scopeSpans", []):
            for span in scope.get("spans", []):
                spans.append(
                    {
                        "trace_id": span["traceId"],
                        "span_id": span["spanId"],
                        "parent": span.get("parentSpanId", ""),
                        "name": span["name"],
                        "kind": span.get("kind", 0),
                        "attrs": {a["key"]: _value(a["value"]) for a in span.get("attributes", [])},
                        "pid": resource.get(SemConv.PROCESS_PID),
                    }
                )
    return spans


# -- protobuf: the fields of opentelemetry/proto/trace/v1/trace.proto the bench reads


def _any_value(message: bytes) -> Any:
    """AnyValue: string (1), bool (2), int (3, two's complement), double (4); None for arrays, maps and bytes."""
    for number, value in fields(message):
        if number == 1 and isinstance(value, bytes):
            return value.decode()
        if number == 2 and isinstance(value, int):
            return bool(value)
        if number == 3 and isinstance(value, int):
            return value - (1 << 64) if value >= 1 << 63 else value
        if number == 4 and isinstance(value, bytes):
            return _DOUBLE(value)[0]
    return None


def _key_value(message: bytes) -> tuple[str, Any]:
    key, value = "", None
    for number, field in fields(message):
        if number == 1 and isinstance(field, bytes):
            key = field.decode()
        elif number == 2 and isinstance(field, bytes):
            value = _any_value(field)
    return key, value


def _attributes(message: bytes, field_number: int) -> dict[str, Any]:
    return dict(_key_value(f) for n, f in fields(message) if n == field_number and isinstance(f, bytes))


def _span(message: bytes, pid: Any) -> ReceivedSpan:
    span: ReceivedSpan = {"trace_id": "", "span_id": "", "parent": "", "name": "", "kind": 0, "attrs": {}, "pid": pid}
    attributes = span["attrs"]
    for number, value in fields(message):
        if isinstance(value, bytes):
            if number == 1:
                span["trace_id"] = value.hex()
            elif number == 2:
                span["span_id"] = value.hex()
            elif number == 4:
                span["parent"] = value.hex()
            elif number == 5:
                span["name"] = value.decode()
            elif number == 9:
                key, attribute = _key_value(value)
                attributes[key] = attribute
        elif number == 6:
            span["kind"] = value
    return span


def decode_protobuf(body: bytes) -> list[ReceivedSpan]:
    """The spans of a serialized ExportTraceServiceRequest (resource_spans 1:
    resource 1, scope_spans 2: spans 2)."""
    spans: list[ReceivedSpan] = []
    for number, resource_spans in fields(body):
        if number != 1 or not isinstance(resource_spans, bytes):
            continue
        parts = list(fields(resource_spans))
        resource = next((_attributes(v, 1) for n, v in parts if n == 1 and isinstance(v, bytes)), {})
        pid = resource.get(SemConv.PROCESS_PID)
        for n, scope_spans in parts:
            if n == 2 and isinstance(scope_spans, bytes):
                spans.extend(_span(v, pid) for m, v in fields(scope_spans) if m == 2 and isinstance(v, bytes))
    return spans


_DECODERS = {_PROTOBUF: decode_protobuf, _JSON: decode_json}


class SpanReceiver:
    def __init__(self) -> None:
        self._bodies: list[tuple[str, bytes]] = []
        self.rejected = 0  # bodies the last ``take`` could not decode
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                content_type = (self.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
                status = 200
                if self.path != "/v1/traces":
                    pass  # metrics: not read by the bench
                elif content_type not in _DECODERS:
                    status = 415
                else:
                    with receiver._lock:
                        receiver._bodies.append((content_type, body))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def clear(self) -> None:
        """Forget what was received so far."""
        with self._lock:
            self._bodies = []

    def take(self) -> list[ReceivedSpan]:
        """The spans received since the last ``take`` or ``clear``, decoded now."""
        with self._lock:
            bodies, self._bodies = self._bodies, []
        spans: list[ReceivedSpan] = []
        self.rejected = 0
        for content_type, body in bodies:
            try:
                spans.extend(_DECODERS[content_type](body))
            except (
                ValueError,
                KeyError,
                TypeError,
                AttributeError,
                IndexError,
                struct.error,
            ):  # orjson's error is a ValueError
                self.rejected += 1
        return spans

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SpanReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
