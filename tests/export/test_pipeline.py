from __future__ import annotations

import gc
import logging
import os
import resource
import sys
import threading
import time
from typing import Any

import httpx
import orjson
import pytest

import litellm_perfkit
from litellm_perfkit import PerfkitMiddleware
from litellm_perfkit._core._backend import ACTIVE
from litellm_perfkit._core._guard import internal_error_counts
from litellm_perfkit._core._timeline import Timeline
from litellm_perfkit._export import Pipeline, read_settings
from litellm_perfkit._export._metrics import MetricStore
from litellm_perfkit._export._spans import Span
from tests.support import apps
from tests.support.hung_server import hung_server
from tests.support.no_collections import no_collections
from tests.support.polling import wait_until
from tests.support.procfs import agents_of
from tests.support.receiver import otlp_receiver, spans_of
from tests.support.servers import free_port, uvicorn_server
from tests.support.speedups import speedups

SECRETS = ["sk-AUTH-SECRET-1", "AZURE-API-KEY-2", "X-API-KEY-3", "PROMPT_BODY_SECRET", "RESPONSE_BODY_SECRET"]


def send_secret_traffic(url: str) -> None:
    headers = {"Authorization": f"Bearer {SECRETS[0]}", "api-key": SECRETS[1], "x-api-key": SECRETS[2]}
    body = {"messages": [{"role": "user", "content": SECRETS[3]}]}
    for stream in (False, True):
        response = httpx.post(f"{url}/v1/chat/completions", json={**body, "stream": stream}, headers=headers)
        assert response.status_code == 200


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_no_body_and_no_secret_header_value_is_exported(tmp_path: Any, protocol: str) -> None:
    jsonl = tmp_path / "spans.jsonl"
    with otlp_receiver() as (endpoint, received):
        litellm_perfkit.configure(exporter="otlp", protocol=protocol, endpoint=endpoint, service_name="secrets")  # type: ignore[arg-type]
        try:
            with uvicorn_server(PerfkitMiddleware(apps.make_app())) as url:
                send_secret_traffic(url)
        finally:
            litellm_perfkit.shutdown()
        litellm_perfkit.configure(exporter="jsonl", jsonl_path=str(jsonl))
        try:
            with uvicorn_server(PerfkitMiddleware(apps.make_app())) as url:
                send_secret_traffic(url)
        finally:
            litellm_perfkit.shutdown()
    exported = b"".join(received.bodies["/v1/traces"] + received.bodies["/v1/metrics"]) + jsonl.read_bytes()
    assert b"request.parse" in exported and b"stream.iterate" in exported  # something real was exported
    for secret in SECRETS:
        assert secret.encode() not in exported, secret


def finished_timeline(path: str = "/v1/chat/completions") -> Timeline:
    timeline = ACTIVE.timeline(time.perf_counter_ns(), "POST", path)
    now = time.perf_counter_ns()
    timeline.finished.append((0, "auth", now, now + 1000, -1))
    timeline.next_index = 1
    timeline.status = 200
    timeline.end_ns = time.perf_counter_ns()
    return timeline


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_unreachable_endpoint_drops_counts_and_warns_once(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        pipeline = litellm_perfkit.configure(exporter="otlp", protocol="http/json", endpoint=dead, mode=mode)  # type: ignore[arg-type]
        try:
            with uvicorn_server(PerfkitMiddleware(apps.make_app())) as url, httpx.Client() as client:
                for _ in range(20):
                    assert client.post(f"{url}/v1/chat/completions", json={}).status_code == 200
                # The last request's record is handed off after its response reached the client,
                # by the server's thread: a loaded machine can read the stats before it.
                counted = wait_until(lambda: pipeline.stats()["dropped_spans"] == 20 * 5, timeout_s=30)
                assert counted is not None, pipeline.stats()
        finally:
            litellm_perfkit.shutdown()
    # In process mode the agent logs to the inherited stderr.
    warnings = [r.getMessage() for r in caplog.records] + capfd.readouterr().err.splitlines()
    assert sum("cannot export spans" in w for w in warnings) == 1
    assert any("100 spans could not be exported" in w for w in warnings)


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_requests_go_on_while_an_export_hangs_on_a_backend_that_never_answers(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Order, not time: 20 requests are answered while the backend holds an export
    unanswered (it answers nothing, ever). A request that waited for an export
    would wait for that answer, and time out."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "600000")  # the export outlasts the test
    try:
        with hung_server() as backend:
            litellm_perfkit.configure(exporter="otlp", protocol="http/json", endpoint=backend.url, mode=mode)  # type: ignore[arg-type]
            with uvicorn_server(PerfkitMiddleware(apps.make_app())) as url, httpx.Client(timeout=60) as client:
                assert client.post(f"{url}/v1/chat/completions", json={}).status_code == 200
                assert backend.asked.wait(60), "no export reached the backend"
                statuses = [client.post(f"{url}/v1/chat/completions", json={}).status_code for _ in range(20)]
                heads = list(backend.received)
    finally:
        litellm_perfkit.shutdown()  # once the backend has closed its connections, unanswered
    assert statuses == [200] * 20
    assert heads and all(head.startswith(b"POST /v1/") for head in heads), heads


class SlowExporter:
    span_form = "tuples"

    def __init__(self) -> None:
        self.exporting = threading.Event()
        self.release = threading.Event()
        self.spans = 0

    def export_spans(self, spans: list[Span]) -> bool:
        self.exporting.set()
        self.release.wait(60)
        self.spans += len(spans)
        return True

    def export_metrics(self, store: MetricStore, start: int, now: int) -> bool:
        return True

    def close(self) -> None:
        return None


def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    """Order, not time: the 100 submits end while the exporter is still stuck. A
    submit that waited for room would wait for the release, which comes after."""
    exporter = SlowExporter()
    settings = read_settings({"OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_SCHEDULE_DELAY": "1"})
    pipeline = Pipeline(settings, exporter=exporter).start()
    try:
        pipeline.submit(finished_timeline())
        assert exporter.exporting.wait(30)  # the thread is now stuck in the slow exporter
        submitter = threading.Thread(target=lambda: [pipeline.submit(finished_timeline()) for _ in range(100)])
        submitter.start()
        submitter.join(30)
        assert not submitter.is_alive() and not exporter.release.is_set()
        assert pipeline.dropped_requests == 90
    finally:
        exporter.release.set()
        pipeline.shutdown()
    assert exporter.spans == 11 * 2


def test_a_nearly_full_queue_is_drained_at_once_not_at_the_next_tick() -> None:
    exporter = SlowExporter()
    exporter.release.set()
    settings = read_settings(
        {"OTEL_BSP_MAX_QUEUE_SIZE": "16", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4", "OTEL_BSP_SCHEDULE_DELAY": "60000"}
    )
    pipeline = Pipeline(settings, exporter=exporter).start()
    try:
        for _ in range(11):
            pipeline.submit(finished_timeline())
        time.sleep(0.3)
        # Full batches (4) do not wake the export thread: less than 3/4 of
        # the queue waits for the (60 s) tick.
        assert exporter.spans == 0
        pipeline.submit(finished_timeline())  # the 12th: 3/4 of 16
        deadline = time.monotonic() + 5
        while exporter.spans < 12 * 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert exporter.spans == 12 * 2 and pipeline.dropped_requests == 0
    finally:
        pipeline.shutdown()


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_process_mode_queues_bytes_so_waiting_requests_give_the_collector_nothing(mode: str) -> None:
    """Live timelines waiting in the queue (five containers each) made the
    garbage collector run and promote them on the serving thread; process mode
    queues their encoded bytes instead."""
    settings = read_settings({"OTEL_TRACES_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "60000"})
    pipeline = Pipeline(settings, mode=mode).start()  # type: ignore[arg-type]
    with no_collections():
        before = gc.get_count()[0]
        for _ in range(100):
            pipeline.submit(finished_timeline())
        waiting = gc.get_count()[0] - before
        pipeline.shutdown()
    if mode == "process":
        assert waiting < 10
    else:
        assert waiting >= 100 * 2  # five containers per timeline, less what other threads freed meanwhile


def test_process_mode_gives_no_memory_back_between_drains() -> None:
    """A drain that freed its queued records and copies (~600 KB) would have
    the allocator give them back to the kernel and the next requests fault
    them in again (0.9 page faults per streamed request in the benchmark). The
    C hand-off keeps its two buffers: once both are warm, a round of requests
    and a drain fault in nothing."""
    speedups()  # fails, saying why, without the C accelerator
    settings = read_settings({"OTEL_TRACES_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "60000"})
    pipeline = Pipeline(settings, mode="process").start()
    timelines = [finished_timeline() for _ in range(1500)]
    faults = []
    try:
        for _ in range(5):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for timeline in timelines:
                pipeline.submit(timeline)
            pipeline.force_flush(until="handed_off")
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    finally:
        pipeline.shutdown()
    assert pipeline.dropped_requests == 0
    assert max(faults[2:]) < 30, faults  # 1,500 requests a round


def test_sampler_ratio_and_parent_flags() -> None:
    from litellm_perfkit._export._spans import Sampler

    ratio = Sampler("traceidratio", 0.25)
    ids = [f"{i * 0x9E3779B97F4A7C15 % (1 << 128):032x}" for i in range(4000)]
    share = sum(ratio.should_sample(i, None) for i in ids) / len(ids)
    assert 0.2 < share < 0.3
    parent = Sampler("parentbased_always_on")
    assert parent.should_sample(ids[0], 0) is False and parent.should_sample(ids[0], 1) is True
    assert parent.should_sample(ids[0], None) is True
    assert Sampler("always_off").should_sample(ids[0], 1) is False


def test_metrics_cover_every_request_even_unsampled(tmp_path: Any) -> None:
    ACTIVE.tally.clear()  # this process's earlier requests
    with otlp_receiver() as (endpoint, received):
        litellm_perfkit.configure(exporter="otlp", protocol="http/json", endpoint=endpoint, sampler="always_off")
        try:
            with uvicorn_server(PerfkitMiddleware(apps.make_app())) as url:
                for stream in (False, True, False):
                    httpx.post(f"{url}/v1/chat/completions", json={"stream": stream})
        finally:
            litellm_perfkit.shutdown()
    assert "/v1/traces" not in received.bodies
    [body] = received.bodies["/v1/metrics"]
    metrics = orjson.loads(body)["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
    by_name = {m["name"]: m for m in metrics}

    def count(name: str, **attrs: Any) -> int:
        total = 0
        for point in by_name[name]["histogram"]["dataPoints"]:
            values = {a["key"]: next(iter(a["value"].values())) for a in point["attributes"]}
            if all(values.get(k) == v for k, v in attrs.items()):
                total += int(point["count"])
        return total

    assert count("perfkit.request.duration") == 3
    assert count("perfkit.llm_request.duration") == 3
    assert count("perfkit.time_to_first_token") == 1
    assert count("perfkit.stage.duration", stage="auth") == 3
    assert count("perfkit.stage.duration", stage="stream.iterate") == 1
    assert count("perfkit.gc.pause") == 3  # every request, most with 0
    assert by_name["perfkit.spans.dropped"]["sum"]["dataPoints"][0]["asInt"] == "0"


def test_the_agent_writes_a_held_back_snapshot_when_the_app_goes_quiet(tmp_path: Any) -> None:
    """The agent writes the Prometheus snapshot at most once a second: a batch
    that comes sooner is in the file within about a second, with no frame after it."""
    from litellm_perfkit._export._prometheus import render

    settings = read_settings(
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "60000", "PERFKIT_PROMETHEUS_DIR": str(tmp_path)}
    )
    pipeline = Pipeline(settings, mode="process").start()

    def requests_in_snapshot() -> float:
        text = render(str(tmp_path))
        return sum(
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith("perfkit_gc_pause_seconds_count")  # a recorded request's
        )

    try:
        pipeline.submit(finished_timeline())
        pipeline.force_flush(until="handed_off")
        deadline = time.monotonic() + 10
        while requests_in_snapshot() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert requests_in_snapshot() == 1
        pipeline.submit(finished_timeline())
        pipeline.submit(finished_timeline())
        pipeline.force_flush(until="handed_off")  # within a second of the first write: held back
        sent = time.monotonic()
        while requests_in_snapshot() < 3 and time.monotonic() < sent + 30:
            time.sleep(0.05)
        assert requests_in_snapshot() == 3
        assert time.monotonic() - sent < 30  # long before the 60 s tick (about 1 s on an idle machine)
    finally:
        pipeline.shutdown()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_requests_passed_through_unrecorded_are_counted_in_the_metrics(tmp_path: Any, mode: str) -> None:
    from litellm_perfkit._export._prometheus import render

    ACTIVE.tally.clear()  # this process's earlier requests
    settings = read_settings(
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "60000", "PERFKIT_PROMETHEUS_DIR": str(tmp_path)}
    )
    pipeline = Pipeline(settings, mode=mode).start()  # type: ignore[arg-type]
    try:
        app = PerfkitMiddleware(apps.make_app(), record_rate=1.0)
        choice = app._record_choice
        assert choice is not None
        choice._clock = lambda: 10**9  # four requests within the same second: the pace takes two
        with uvicorn_server(app) as url:
            for _ in range(4):
                httpx.post(f"{url}/v1/chat/completions", json={})
        pipeline.force_flush()
        text = render(str(tmp_path))
    finally:
        pipeline.shutdown()
    labels = (
        'http_request_method="POST",http_route="/v1/chat/completions",http_response_status_code="200",error_type=""'
    )
    assert f'perfkit_requests_total{{{labels},perfkit_recorded="false"}} 2' in text, text[-2000:]
    assert f'perfkit_requests_total{{{labels},perfkit_recorded="true"}} 2' in text
    assert f"perfkit_request_duration_seconds_count{{{labels}}} 4" in text  # every request, once
    assert "# HELP perfkit_requests_total " in text
    assert 'perfkit_stage_duration_seconds_count{stage="auth"} 2' in text  # the recorded ones' stages


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_stats_after_shutdown_are_the_last_counts_and_log_nothing(
    tmp_path: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    jsonl = tmp_path / "spans.jsonl"
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        pipeline = litellm_perfkit.configure(exporter="jsonl", jsonl_path=str(jsonl), mode=mode)  # type: ignore[arg-type]
        with uvicorn_server(PerfkitMiddleware(apps.make_app())) as url, httpx.Client() as client:
            for _ in range(4):
                assert client.post(f"{url}/v1/chat/completions", json={}).status_code == 200
        litellm_perfkit.shutdown()
        after = pipeline.stats()
    assert after["exported_spans"] == len(jsonl.read_text().splitlines()) == 4 * 5
    warnings = [r.getMessage() for r in caplog.records] + capfd.readouterr().err.splitlines()
    assert not [w for w in warnings if "perfkit" in w], warnings


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_shutdown_during_load_changes_no_answer_and_counts_each_request_once(
    mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Eight users (JSON and streams) on an instrumented app; ``shutdown()`` once 50 requests
    were answered, the load going on for 1 s after it. The health file ``shutdown()`` writes holds the counts up to it."""
    ACTIVE.tally.clear()  # this process's earlier requests
    errors_before = sum(internal_error_counts().values())  # earlier tests' injected faults, in this process
    monkeypatch.setenv("PERFKIT_PROMETHEUS_DIR", str(tmp_path))
    expected = {False: orjson.dumps({"id": "x", "choices": [{"message": {"content": "RESPONSE_BODY_SECRET"}}]})}
    expected[True] = apps.ROLE + apps.TOKEN * apps.STREAM_CHUNKS + apps.DONE
    sent: list[tuple[float, float, bool]] = []  # (started, ended, answered as without perfkit) per request
    stop = threading.Event()

    def user(url: str, stream: bool) -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    response = client.post(f"{url}/v1/chat/completions", json={"stream": stream})
                    right = response.status_code == 200 and response.content == expected[stream]
                except httpx.HTTPError:
                    right = False
                sent.append((started, time.monotonic(), right))

    with otlp_receiver() as (endpoint, received), caplog.at_level(logging.WARNING):
        litellm_perfkit.configure(exporter="otlp", protocol="http/json", endpoint=endpoint, mode=mode)  # type: ignore[arg-type]
        try:
            with uvicorn_server(PerfkitMiddleware(apps.make_app(), record_rate="all")) as url:
                users = [threading.Thread(target=user, args=(url, i % 2 == 1)) for i in range(8)]
                for thread in users:
                    thread.start()
                deadline = time.monotonic() + 30
                while len(sent) < 50 and time.monotonic() < deadline:  # a loaded machine starts slowly
                    time.sleep(0.05)
                called = time.monotonic()
                litellm_perfkit.shutdown()
                returned = time.monotonic()
                time.sleep(1.0)
                stop.set()
                for thread in users:
                    thread.join(30)
        finally:
            litellm_perfkit.shutdown()
        threads = [t.name for t in threading.enumerate() if t.name.startswith("perfkit")]
        agents = agents_of(os.getpid())
    [health] = [orjson.loads(p.read_bytes()) for p in tmp_path.glob("*.health")]
    spans = spans_of(received)
    request_spans = [s["traceId"] for s in spans if "http.request.method" in s["attrs"]]
    ended_before = sum(1 for _, ended, _ in sent if ended < called)
    started_before = sum(1 for started, _, _ in sent if started < returned)
    said = (
        f"{health}, {len(sent)} sent, {ended_before} ended before shutdown, {started_before} started before it returned"
    )
    print(f"\n{mode}: {said}, shutdown() took {returned - called:.2f} s", file=sys.stderr)  # shown with -s
    assert all(right for _, _, right in sent) and sum(1 for s, _, _ in sent if s > returned) > 0, said
    # Each request counted once, up to the health file's write inside shutdown(). Recording stops
    # when shutdown() begins: a request perfkit had not finished by then (its client may already
    # have the whole answer: the middleware ends the request after the last byte) is counted only.
    settled = sum(1 for _, ended, _ in sent if ended < called - 0.5)
    assert 50 <= ended_before <= health["requests"] <= started_before, said
    assert settled <= health["recorded"] <= health["requests"], said
    # A healthy backend: every recorded request's five spans delivered, each request once.
    assert health["dropped_spans"] == health["dropped_requests"] == health["internal_errors"] - errors_before == 0, said
    assert health["exported_spans"] == len(spans) == 5 * health["recorded"], said
    assert len(request_spans) == len(set(request_spans)) == health["recorded"], said
    assert threads == [] and agents == [], (threads, agents)
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
