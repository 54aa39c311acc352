"""An embedded OTLP/HTTP receiver (JSON encoding) on 127.0.0.1 for the bench.

The proxy under test exports its spans here; the bench joins them to its own
client records by trace id.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

__all__ = ["SpanReceiver"]


def _value(v: dict[str, Any]) -> Any:
    raw = next(iter(v.values()), None)
    return int(raw) if "intValue" in v and raw is not None else raw


class SpanReceiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                status = 200
                if self.path == "/v1/traces":
                    try:
                        receiver._add(orjson.loads(body))
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        status = 400
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _add(self, request: dict[str, Any]) -> None:
        spans = []
        for resource_spans in request.get("resourceSpans", []):
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
                            "pid": resource.get("process.pid"),
                        }
                    )
        with self._lock:
            self.spans.extend(spans)

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            spans, self.spans = self.spans, []
        return spans

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SpanReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
