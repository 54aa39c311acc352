"""The export agent under faults: killed mid-run, it is replaced and what it
held is counted as dropped; at a shutdown with a backlog for a backend that
never answers, it gives up within a bound and counts what it drops."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._export import Pipeline, read_settings
from tests.export.test_pipeline import finished_timeline
from tests.support.hung_server import hung_server


def health(directory: Path) -> dict[str, int]:
    counts: dict[str, int] = orjson.loads((directory / f"{os.getpid()}.health").read_bytes())
    return counts


def test_a_killed_agent_is_replaced_and_what_it_held_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The package's ``_pipeline`` is its active pipeline, not this module.
    monkeypatch.setattr(sys.modules["litellm_perfkit._export._pipeline"], "_RESTART_S", 0.0)
    settings = read_settings(
        {
            "OTEL_TRACES_EXPORTER": "jsonl",
            "PERFKIT_JSONL_PATH": str(tmp_path / "spans.jsonl"),
            "PERFKIT_PROMETHEUS_DIR": str(tmp_path),
        }
    )
    pipeline = Pipeline(settings, mode="process").start()
    try:
        for _ in range(5):
            pipeline.submit(finished_timeline())
        pipeline.force_flush()  # the agent says it handled 5
        first = pipeline._agent
        assert first is not None and first.last_stats["recorded"] == 5
        spans_each = first.last_stats["exported_spans"] // 5
        for _ in range(7):
            pipeline.submit(finished_timeline())
        pipeline.force_flush(until="handed_off")
        os.kill(first.process.pid, signal.SIGKILL)  # before it could say anything about these 7
        first.process.wait()
        for _ in range(4):
            pipeline.submit(finished_timeline())
        pipeline.force_flush()
        assert pipeline._agent is not None and pipeline._agent is not first
    finally:
        pipeline.shutdown()
    counts = health(tmp_path)
    # Submitted past the middleware, these 16 are not in the process's traffic tally (other tests' requests are).
    assert counts["recorded"] == 16 and counts["requests"] == max(16, pipeline._tally.requests)
    assert counts["dropped_requests"] == 7  # lost with the killed agent
    assert counts["exported_spans"] == spans_each * (5 + 4) and counts["dropped_spans"] == 0
    assert len((tmp_path / "spans.jsonl").read_text().splitlines()) >= spans_each * (5 + 4)


def test_a_shutdown_behind_a_hung_backend_ends_within_a_bound_and_counts_every_span(tmp_path: Path) -> None:
    with hung_server() as backend:
        settings = read_settings(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": backend.url,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                "OTEL_EXPORTER_OTLP_TIMEOUT": "300",
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",  # a backlog of 50 exports of 0.3 s each
                "PERFKIT_PROMETHEUS_DIR": str(tmp_path),
            }
        )
        pipeline = Pipeline(settings, mode="process").start()
        for _ in range(200):
            pipeline.submit(finished_timeline())
        pipeline.force_flush(until="handed_off")
        started = time.monotonic()
        pipeline.shutdown()
        took = time.monotonic() - started
    # One wait for the agent's last stats (the export timeout + 5 s), then it gives up.
    assert took < settings.timeout_s + 5 + 3, took
    counts = health(tmp_path)
    assert counts["recorded"] == 200 and counts["dropped_requests"] == 0, counts
    assert counts["exported_spans"] == 0 and counts["dropped_spans"] == 2 * 200, counts


def test_a_forked_child_exports_its_own_requests_and_shares_nothing_with_its_parent(tmp_path: Path) -> None:
    """gunicorn --preload: configure() in the parent, requests served in forked children."""
    settings = read_settings(
        {
            "OTEL_TRACES_EXPORTER": "jsonl",
            "PERFKIT_JSONL_PATH": str(tmp_path / "spans.jsonl"),
            "PERFKIT_PROMETHEUS_DIR": str(tmp_path),
        }
    )
    pipeline = Pipeline(settings, mode="process").start()
    for _ in range(3):
        pipeline.submit(finished_timeline())
    pipeline.force_flush(until="handed_off")  # the parent's agent is running
    parent_agent = pipeline._agent
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is its health file and exit code
        code = 1
        try:
            from litellm_perfkit._core import _sink

            for _ in range(5):
                _sink.sink(finished_timeline())  # what the middleware calls: the child's own pipeline
            assert pipeline._agent is None or pipeline._agent is not parent_agent
            pipeline.shutdown()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    for _ in range(2):
        pipeline.submit(finished_timeline())
    pipeline.shutdown()
    child_counts = orjson.loads((tmp_path / f"{child}.health").read_bytes())
    assert child_counts["recorded"] == 5 and child_counts["exported_spans"] == 10, child_counts
    counts = health(tmp_path)
    assert counts["recorded"] == 5 and counts["exported_spans"] == 10 and counts["dropped_requests"] == 0, counts
    assert len((tmp_path / "spans.jsonl").read_text().splitlines()) == 20
