"""A minimal OTLP/HTTP receiver on 127.0.0.1 that keeps every request body,
and the spans in what it received (OTLP/JSON)."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


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
