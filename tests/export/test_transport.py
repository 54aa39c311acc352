"""What a failed export says (the backend's fault, or a missing extra), and what each protocol needs."""

from __future__ import annotations

import builtins
import logging
import os
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

import litellm_perfkit
from litellm_perfkit import PerfkitMiddleware
from litellm_perfkit._core import _guard
from litellm_perfkit._export._metrics import MetricStore
from litellm_perfkit._export._settings import ExportSettings, read_settings
from litellm_perfkit._export._transport import OtlpGrpcExporter, OtlpHttpExporter, make_exporter
from tests.support import apps
from tests.support.procfs import agents_of
from tests.support.receiver import metrics_of, otlp_grpc_receiver, otlp_receiver
from tests.support.servers import uvicorn_server


def blocked(monkeypatch: pytest.MonkeyPatch, *prefixes: str) -> None:
    """Imports of these packages fail from now on, as where they are not installed."""
    real_import = builtins.__import__

    def without(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith(prefixes):
            raise ModuleNotFoundError(f"No module named {name.split('.')[0]!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)


def test_protobuf_metrics_need_no_protobuf_package(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MetricStore()
    store.counters["perfkit.requests.unrecorded"] = 3
    with otlp_receiver() as (url, received):
        settings = ExportSettings(
            endpoint=url, traces_endpoint=f"{url}/v1/traces", metrics_endpoint=f"{url}/v1/metrics"
        )
        exporter = OtlpHttpExporter(settings, "http/protobuf")
        blocked(monkeypatch, "google", "opentelemetry.proto")
        assert exporter.export_metrics(store, 0, 1) is True
        exporter.close()
    monkeypatch.undo()
    [request] = metrics_of(received)
    metrics = {m.name: m for m in request.resource_metrics[0].scope_metrics[0].metrics}
    assert metrics["perfkit.requests.unrecorded"].sum.data_points[0].as_int == 3


def test_grpc_without_grpcio_names_the_extra_in_one_line_and_sends_over_http(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked(monkeypatch, "grpc")
    monkeypatch.setattr(_guard, "_warned", set())
    settings = read_settings(
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}
    )
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        exporter = make_exporter(settings)
    assert isinstance(exporter, OtlpHttpExporter)
    assert [r.getMessage() for r in caplog.records] == [
        "perfkit: OTLP over grpc needs grpcio: pip install 'litellm_perfkit[cli]' (or [otlp]); "
        "using http/protobuf on port 4318"
    ]
    assert exporter._traces.url == "http://collector:4318/v1/traces"
    assert exporter._metrics.url == "http://collector:4318/v1/metrics"


def test_grpc_sends_each_signal_to_its_own_endpoint() -> None:
    store = MetricStore()
    with otlp_grpc_receiver() as (traces_url, traces), otlp_grpc_receiver() as (metrics_url, metrics):
        env = {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces_url,
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": metrics_url,
        }
        exporter = OtlpGrpcExporter(read_settings(env))
        try:
            assert exporter.export_spans([]) is True
            assert exporter.export_metrics(store, 0, 1) is True
        finally:
            exporter.close()
    assert set(traces.bodies) == {"/v1/traces"} and set(metrics.bodies) == {"/v1/metrics"}
    assert len(metrics_of(metrics)) == 1


def test_the_console_exporter_writes_from_the_app_process() -> None:
    """The console is the app's stdout; the export agent's stdout is the pipe it reports its stats on."""
    pipeline = litellm_perfkit.configure(exporter="console", mode="process")
    try:
        assert pipeline.mode == "thread"
    finally:
        litellm_perfkit.shutdown()


def _agents() -> list[int]:
    """This process's export agents, zombies included."""
    return agents_of(os.getpid())


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_a_full_disk_under_the_jsonl_exporter_drops_counts_and_warns_once(
    mode: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """/dev/full: every write fails with ENOSPC, as on a full disk."""
    monkeypatch.setattr(_guard, "_warned", set())
    monkeypatch.setattr(_guard, "_counts", {})  # the process's count of earlier tests' deliberate errors
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        pipeline = litellm_perfkit.configure(exporter="jsonl", jsonl_path="/dev/full", mode=mode)  # type: ignore[arg-type]
        try:
            app = PerfkitMiddleware(apps.make_app(), record_rate="all")
            with uvicorn_server(app) as url, httpx.Client() as client:
                statuses = [client.post(f"{url}/v1/chat/completions", json={}).status_code for _ in range(20)]
                # The export runs behind the requests: wait until every span was tried (or 30 s).
                deadline = time.monotonic() + 30
                while (stats := pipeline.stats())["dropped_spans"] < 20 * 5 and time.monotonic() < deadline:
                    time.sleep(0.05)
                agents = _agents()
        finally:
            litellm_perfkit.shutdown()
    warnings = [r.getMessage() for r in caplog.records] + capfd.readouterr().err.splitlines()
    assert statuses == [200] * 20
    assert stats["recorded"] == 20 and stats["exported_spans"] == 0, stats
    assert stats["dropped_spans"] == 20 * 5 and stats["internal_errors"] == 0, stats
    assert sum("cannot write spans to /dev/full (No space left on device)" in w for w in warnings) == 1, warnings
    assert not any("agent died" in w for w in warnings), warnings
    assert len(agents) == (1 if mode == "process" else 0) and _agents() == []


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_configure_called_twice_replaces_the_pipeline_and_each_request_is_exported_once(
    mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_guard, "_counts", {})  # the process's count of earlier tests' deliberate errors
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        litellm_perfkit.configure(exporter="jsonl", jsonl_path=str(first), mode=mode)  # type: ignore[arg-type]
        try:
            app = PerfkitMiddleware(apps.make_app(), record_rate="all")
            with uvicorn_server(app) as url, httpx.Client() as client:
                statuses = [client.post(f"{url}/v1/chat/completions", json={}).status_code for _ in range(10)]
                replaced = litellm_perfkit.configure(exporter="jsonl", jsonl_path=str(second), mode=mode)  # type: ignore[arg-type]
                statuses += [client.post(f"{url}/v1/chat/completions", json={}).status_code for _ in range(10)]
                stats = replaced.stats()
                agents = _agents()
        finally:
            litellm_perfkit.shutdown()

    def request_spans(path: Path) -> list[str]:
        spans = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        return [s["traceId"] for s in spans if any(a["key"] == "http.request.method" for a in s["attributes"])]

    assert statuses == [200] * 20
    before, after = request_spans(first), request_spans(second)
    # The first pipeline flushed its 10 at the replacement; the new one has the next 10; none twice.
    assert len(before) == len(after) == 10 and len(set(before + after)) == 20, (before, after)
    assert stats["recorded"] == 10 and stats["dropped_spans"] == stats["internal_errors"] == 0, stats
    assert len(agents) == (1 if mode == "process" else 0) and _agents() == []  # the first agent ended and was reaped
    assert not [r.getMessage() for r in caplog.records if "perfkit" in r.getMessage()]
