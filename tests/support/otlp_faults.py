"""An OTLP/HTTP receiver (JSON encoding) on 127.0.0.1 whose behaviour a test
switches (``switch()``) while an app exports to it, counting what it received and what it
acknowledged.

Behaviours: ``ok`` (200 at once), ``hung`` (reads the request, never
answers), ``slow`` (200 after ``slow_s``), ``5xx`` (503, which OTLP retries,
then 500), ``429`` (429 with ``Retry-After: 1``). ``stop()`` closes the
listening socket (connection refused) and ``start()`` opens it again on the
same port: a backend that is down, or restarted mid-run.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import orjson

from litellm_perfkit._wire._names import SemConv

__all__ = ["Behaviour", "FaultyReceiver", "faulty_receiver", "free_port", "request_errors", "span_count"]

Behaviour = Literal["ok", "hung", "slow", "5xx", "429"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _spans(body: bytes) -> list[dict[str, Any]]:
    return [
        span
        for resource in orjson.loads(body).get("resourceSpans", ())
        for scope in resource.get("scopeSpans", ())
        for span in scope.get("spans", ())
    ]


def span_count(body: bytes) -> int:
    """Spans in one OTLP/JSON trace export request."""
    return len(_spans(body))


def request_errors(body: bytes) -> dict[str, int]:
    """The request spans' ``error.type`` values (OK: none), counted."""
    errors: dict[str, int] = {}
    for span in _spans(body):
        attributes = {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", ())}
        if SemConv.HTTP_REQUEST_METHOD in attributes:
            error = str(attributes.get(SemConv.ERROR_TYPE, "OK"))
            errors[error] = errors.get(error, 0) + 1
    return errors


@dataclass
class FaultyReceiver:
    port: int
    behaviour: Behaviour = "ok"
    slow_s: float = 2.0
    received_spans: int = 0  # in every trace request that arrived, answered or not
    acknowledged_spans: int = 0  # in trace requests answered 2xx: delivered
    trace_requests: int = 0
    metric_requests: int = 0
    answers: dict[int, int] = field(default_factory=dict)  # status -> count
    request_errors: dict[str, int] = field(default_factory=dict)  # acknowledged request spans by error.type
    _server: ThreadingHTTPServer | None = None
    _release: threading.Event = field(default_factory=threading.Event)  # ends the hung handlers
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _connections: set[socket.socket] = field(default_factory=set)  # open ones, cut by stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with receiver._lock:
                    receiver._connections.add(self.connection)

            def finish(self) -> None:
                with receiver._lock:
                    receiver._connections.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                traces = self.path.endswith("/v1/traces")
                try:
                    spans = span_count(body) if traces else 0
                except ValueError:  # cut short by stop(): no request
                    self.close_connection = True
                    return
                with receiver._lock:
                    if traces:
                        receiver.trace_requests += 1
                        receiver.received_spans += spans
                    else:
                        receiver.metric_requests += 1
                behaviour = receiver.behaviour
                if behaviour == "hung":
                    receiver._release.wait()
                    self.close_connection = True
                    return
                if behaviour == "slow":
                    time.sleep(receiver.slow_s)
                status = {"ok": 200, "slow": 200, "5xx": 503, "429": 429}[behaviour]
                self.send_response(status)
                if status == 429:
                    self.send_header("retry-after", "1")
                self.send_header("content-length", "0")
                self.end_headers()
                with receiver._lock:
                    receiver.answers[status] = receiver.answers.get(status, 0) + 1
                    if traces and status == 200:
                        receiver.acknowledged_spans += spans
                        for error, count in request_errors(body).items():
                            receiver.request_errors[error] = receiver.request_errors.get(error, 0) + count

            def log_message(self, *args: object) -> None:
                return None

        ThreadingHTTPServer.allow_reuse_address = True
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._release.clear()
        self._server = server
        threading.Thread(target=server.serve_forever, name="faulty-receiver", daemon=True).start()

    def switch(self, behaviour: Behaviour) -> None:
        """Answer as ``behaviour`` from now on; exports a hung backend holds are let go unanswered."""
        held, self._release = self._release, threading.Event()
        self.behaviour = behaviour
        held.set()

    def stop(self) -> None:
        """Refuse connections from now on (those in flight are cut)."""
        server, self._server = self._server, None
        self._release.set()
        if server is not None:
            server.shutdown()
            server.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for connection in connections:  # kept-alive ones would go on being served
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def faulty_receiver(behaviour: Behaviour = "ok", running: bool = True) -> Iterator[FaultyReceiver]:
    receiver = FaultyReceiver(free_port(), behaviour)
    if running:
        receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
