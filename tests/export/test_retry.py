"""Retrying a busy OTLP backend: the policy on a fake clock, and the HTTP
exporter against a local server that answers 503, 429 or 400."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from litellm_perfkit._export._retry import Busy, RetryPolicy, retry_after_s
from litellm_perfkit._export._settings import ExportSettings
from litellm_perfkit._export._spans import Span
from litellm_perfkit._export._transport import OtlpHttpExporter


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def policy(clock: FakeClock, timeout_s: float = 10.0) -> RetryPolicy:
    return RetryPolicy(timeout_s, clock=clock, sleep=clock.sleep)


def test_busy_twice_then_sent_with_doubling_pauses() -> None:
    clock, answers = FakeClock(), [Busy("503"), Busy("503"), None]

    def send(left: float) -> str:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
        return "sent"

    assert policy(clock).run(send) == "sent"
    assert clock.slept == [0.25, 0.5]


def test_the_backends_retry_after_wins_and_a_pause_past_the_timeout_ends_the_export() -> None:
    clock = FakeClock()
    calls: list[float] = []

    def send(left: float) -> None:
        calls.append(left)
        raise Busy("429", retry_after_s=3.0)

    with pytest.raises(Busy):
        policy(clock, timeout_s=7.0).run(send)
    assert clock.slept == [3.0, 3.0]  # a third pause would end past 7 s
    assert calls == [7.0, 4.0, 1.0]  # each try gets what is left of the timeout


def test_out_of_tries() -> None:
    clock = FakeClock()
    with pytest.raises(Busy):
        policy(clock, timeout_s=1000).run(lambda left: (_ for _ in ()).throw(Busy("503")))
    assert len(clock.slept) == 4  # five tries


def test_retry_after_forms() -> None:
    assert retry_after_s("5") == 5.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:10 GMT", now_unix_s=1445412480.0) == 10.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now_unix_s=1445412490.0) == 0.0  # already past
    assert retry_after_s("soon") is None and retry_after_s(None) is None


@pytest.fixture
def backend() -> Iterator[tuple[str, list[int], list[tuple[int, dict[str, str]]]]]:
    """A local OTLP/HTTP endpoint answering the scripted (status, headers) in turn, then 200."""
    seen: list[int] = []
    script: list[tuple[int, dict[str, str]]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            status, headers = script.pop(0) if script else (200, {})
            seen.append(status)
            self.send_response(status)
            for name, value in {**headers, "Content-Length": "0"}.items():
                self.send_header(name, value)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen, script
    finally:
        server.shutdown()


def exporter(url: str) -> OtlpHttpExporter:
    settings = ExportSettings(
        endpoint=url, traces_endpoint=f"{url}/v1/traces", metrics_endpoint=f"{url}/v1/metrics", timeout_s=5.0
    )
    return OtlpHttpExporter(settings, "http/json")


SPAN: Span = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "", "GET /", 2, 1, 2, [], 0, "")


def test_a_busy_backend_gets_the_spans_on_a_later_try(
    backend: tuple[str, list[int], list[tuple[int, dict[str, str]]]],
) -> None:
    url, seen, script = backend
    script += [(503, {"Retry-After": "0"}), (429, {"Retry-After": "0"})]
    assert exporter(url).export_spans([SPAN]) is True
    assert seen == [503, 429, 200]


def test_a_refusal_is_not_retried(backend: tuple[str, list[int], list[tuple[int, dict[str, str]]]]) -> None:
    url, seen, script = backend
    script.append((400, {}))
    assert exporter(url).export_spans([SPAN]) is False
    assert seen == [400]
