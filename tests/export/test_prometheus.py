"""Prometheus' text format from several pipelines' snapshots, summed."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from litellm_perfkit._bench._launch import free_port
from litellm_perfkit._core._traffic import _PyTally
from litellm_perfkit._export._metrics import MetricStore
from litellm_perfkit._export._prometheus import SnapshotWriter, render, serve_prometheus
from litellm_perfkit._export._traffic import Traffic, keep
from litellm_perfkit.types import RequestRecord, StageRecord
from tests.support.prometheus import metric_families


def store(requests: int, auth_ms: float) -> MetricStore:
    metrics = MetricStore()
    tally = _PyTally()
    for n in range(requests):
        tally.add("POST", "/v1/chat/completions", 200, "", False, True, 5_000_000, -1)
        start = n * 10_000_000
        auth = StageRecord(name="auth", start_ns=start, end_ns=start + int(auth_ms * 1e6), parent=-1)
        metrics.observe(
            RequestRecord(
                start_ns=start,
                method="POST",
                path="/v1/chat/completions",
                status=200,
                end_ns=start + 5_000_000,
                stages=(auth,),
            )
        )
    keep(metrics, Traffic.of(tally))
    return metrics


def test_two_workers_snapshots_are_summed(tmp_path: Path) -> None:
    for pid, (requests, ms) in {"101": (3, 1.0), "102": (5, 2.0)}.items():
        writer = SnapshotWriter(str(tmp_path))
        writer.path = tmp_path / f"{pid}.json"
        writer.write(store(requests, ms))
    (tmp_path / ".half-written.tmp").write_text("{")  # a write in progress is not read
    families = metric_families(render(str(tmp_path)))
    stage = families["perfkit_stage_duration_seconds"]
    samples = {(s.name, s.labels.get("le")): s.value for s in stage.samples if s.labels.get("stage") == "auth"}
    assert samples[("perfkit_stage_duration_seconds_count", None)] == 8
    assert abs(samples[("perfkit_stage_duration_seconds_sum", None)] - (3 * 0.001 + 5 * 0.002)) < 1e-9
    assert samples[("perfkit_stage_duration_seconds_bucket", "0.001")] == 3  # le is inclusive
    assert samples[("perfkit_stage_duration_seconds_bucket", "+Inf")] == 8
    overhead = families["perfkit_request_overhead_seconds"]
    assert sum(s.value for s in overhead.samples if s.name.endswith("_count")) == 8
    assert families["perfkit_requests_dropped"].type == "counter"


def test_the_python_api_serves_metrics_on_loopback(tmp_path: Path) -> None:
    port = free_port()
    before = os.environ.get("PERFKIT_PROMETHEUS_DIR")
    try:
        server = serve_prometheus(port, directory=str(tmp_path))
        assert os.environ["PERFKIT_PROMETHEUS_DIR"] == str(tmp_path)  # pipelines configured after this write there
        SnapshotWriter(str(tmp_path)).write(store(2, 1.0))
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        server.shutdown()
    finally:
        if before is None:
            os.environ.pop("PERFKIT_PROMETHEUS_DIR", None)
        else:
            os.environ["PERFKIT_PROMETHEUS_DIR"] = before
    assert 'perfkit_stage_duration_seconds_count{stage="auth"} 2' in text
    assert server.server_address[0] == "127.0.0.1"


def test_a_snapshot_is_written_at_most_once_an_interval_and_a_held_back_one_comes_due(tmp_path: Path) -> None:
    now = [100.0]
    writer = SnapshotWriter(str(tmp_path), interval_s=1.0, clock=lambda: now[0])
    assert writer.due_in() == 0.0  # nothing written yet
    writer.write(store(1, 1.0))
    assert writer.path.exists() and writer.due_in() is None
    first = writer.path.read_bytes()
    now[0] += 0.3
    writer.changed()
    writer.write(store(2, 1.0))  # too soon: held back
    assert writer.path.read_bytes() == first
    assert writer.due_in() == pytest.approx(0.7)
    now[0] += 0.7
    assert writer.due_in() == 0.0
    writer.write(store(2, 1.0))
    second = writer.path.read_bytes()
    assert second != first and writer.due_in() is None
    now[0] += 5
    writer.write(store(3, 1.0))  # nothing changed since (changed() not called): no write, even when due
    assert writer.path.read_bytes() == second and writer.due_in() is None
    writer.changed()
    now[0] += 0.1
    writer.write(store(4, 1.0), force=True)  # a flush writes at once
    assert writer.due_in() is None
    requests = {s.name: s.value for f in metric_families(render(str(tmp_path))).values() for s in f.samples}
    assert requests["perfkit_request_duration_seconds_count"] == 4
