"""Minimal OTLP receivers on 127.0.0.1 (HTTP, and gRPC) that keep every
request body by path, the spans in what they received (OTLP/JSON), and the
metrics (either encoding, decoded by opentelemetry-proto)."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest


class Received:
    def __init__(self) -> None:
        self.bodies: dict[str, list[bytes]] = {}
        self.headers: list[dict[str, str]] = []
        self.status = 200


@contextlib.contextmanager
def otlp_receiver(tls: ssl.SSLContext | None = None) -> Iterator[tuple[str, Received]]:
    """Yields its URL (https with ``tls``, a server-side context) and what it received."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            received.bodies.setdefault(self.path, []).append(body)
            received.headers.append(dict(self.headers))
            self.send_response(received.status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _value(v: dict[str, Any]) -> Any:
    raw = next(iter(v.values()))
    return int(raw) if "intValue" in v else raw


def spans_of(received: Received) -> list[dict[str, Any]]:
    """Every span received as OTLP/JSON, with ``attrs`` (its attributes as a
    dict) and ``pid`` (its resource's process.pid)."""
    spans = []
    for body in list(received.bodies.get("/v1/traces", [])):
        for resource_spans in orjson.loads(body)["resourceSpans"]:
            resource = {a["key"]: _value(a["value"]) for a in resource_spans["resource"]["attributes"]}
            for scope in resource_spans["scopeSpans"]:
                for span in scope["spans"]:
                    span["attrs"] = {a["key"]: _value(a["value"]) for a in span.get("attributes", [])}
                    span["pid"] = resource.get("process.pid")
                    spans.append(span)
    return spans


# gRPC method -> the HTTP path the same signal arrives on, so both receivers keep bodies alike.
_GRPC_PATHS = {
    "opentelemetry.proto.collector.trace.v1.TraceService": "/v1/traces",
    "opentelemetry.proto.collector.metrics.v1.MetricsService": "/v1/metrics",
}


@contextlib.contextmanager
def otlp_grpc_receiver() -> Iterator[tuple[str, Received]]:
    """OTLP/gRPC: yields its URL and what it received (bodies under the HTTP paths)."""
    received = Received()

    def handler(path: str) -> Any:
        def answer(request: bytes, context: Any) -> bytes:
            received.bodies.setdefault(path, []).append(request)
            return b""  # an empty Export*ServiceResponse: everything accepted

        return grpc.unary_unary_rpc_method_handler(answer, request_deserializer=None, response_serializer=None)

    server = grpc.server(futures.ThreadPoolExecutor(2))
    for service, path in _GRPC_PATHS.items():
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"Export": handler(path)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(None)


def metrics_of(received: Received, encoding: str = "protobuf") -> list[ExportMetricsServiceRequest]:
    """Every metrics request received, decoded by opentelemetry-proto (``encoding``: protobuf or json)."""
    bodies = list(received.bodies.get("/v1/metrics", []))
    if encoding == "json":
        return [json_format.Parse(body, ExportMetricsServiceRequest()) for body in bodies]
    return [ExportMetricsServiceRequest.FromString(body) for body in bodies]
