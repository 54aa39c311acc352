"""The weighted sample on the real proxy (1.103.0) at its default record
rate, under perfkit's load driver at 3x the workers' combined cap: the auth
stage's weighted count on ``/metrics`` against the requests that reached auth.

One worker: on this machine a fresh 1.103.0 venv's proxy with two workers
loses them at start (``Child process ... died``), perfkit or not."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from litellm_perfkit._bench._launch import free_port
from litellm_perfkit._load import LoadPlan, Workload, run_load
from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

WORKERS, CAP = 1, 10.0  # perfkit run's default record rate, per worker
RATE, SECONDS = 3 * WORKERS * CAP, 30.0


def auth_count(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "perfkit_stage_duration_seconds"
        for sample in family.samples
        if sample.name.endswith("_count") and sample.labels.get("stage") == "auth"
    )


def auth_samples(spans: Path) -> list[tuple[float, int]]:
    """(auth's duration ms, the request's adjusted count) per recorded request, from perfkit run's spans."""
    weight: dict[str, int] = {}
    auth: dict[str, float] = defaultdict(float)
    for span in map(orjson.loads, spans.read_bytes().splitlines()):
        attributes: dict[str, Any] = {a["key"]: a["value"] for a in span["attributes"]}
        if span["kind"] == 2:
            weight[span["traceId"]] = int(attributes["perfkit.adjusted_count"]["intValue"])
        elif span["name"] == "auth":
            auth[span["traceId"]] += attributes["perfkit.stage.duration_ms"]["doubleValue"]
    return [(auth[trace], weight[trace]) for trace in auth if trace in weight]


def run(tmp_path: Path, upstream: str, record_rate: str) -> tuple[int, float, list[tuple[float, int]]]:
    """(requests sent, auth's count on /metrics, (auth ms, adjusted count) per recorded request) of one run."""
    port, spans = free_port(), tmp_path / f"spans-{record_rate}.jsonl"
    workdir = tmp_path / record_rate
    workdir.mkdir()
    with litellm_proxy(
        "1.103.0",
        upstream,
        workdir,
        workers=WORKERS,
        perfkit_args=(
            *("--record-rate", record_rate),
            *("--exporter", "jsonl", "--out", str(spans)),
            *("--prometheus-port", str(port)),
        ),
    ) as url:
        # No traceparent: a sampled one would be recorded beyond the rate (docs/telemetry.md).
        result = run_load(
            Workload(url=url, traceparent="off"),
            LoadPlan(concurrency=64, rate=RATE, duration_s=SECONDS),
            progress="off",
        )
        sent = result["summary"]["requests"]
        # A connection the proxy closes under load now and then (a few in a thousand) is counted, not a failure here.
        assert result["summary"]["errors"] <= 0.01 * sent, result["summary"]["errors_by_class"]
        deadline = time.monotonic() + 20
        count = auth_count(port)
        while count < sent * 0.9 and time.monotonic() < deadline:  # the workers' snapshots, written each second
            time.sleep(0.5)
            count = auth_count(port)
        time.sleep(2)
        count = auth_count(port)
    return sent, count, auth_samples(spans)


def test_the_weighted_sample_counts_the_requests_that_reached_auth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PERFKIT_RECORD_RATE")  # perfkit run's default, as users get it
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "500")
    with mock_process("--ttft-ms", "5", "--chunks", "3") as upstream:
        sent, weighted_count, sampled = run(tmp_path, upstream, "10")
    recorded = len(sampled)
    assert recorded < sent / 2  # a sample: the cap held
    assert sum(weight for _, weight in sampled) == pytest.approx(weighted_count, rel=0.05)  # the spans say the same
    assert abs(weighted_count - sent) <= 0.05 * sent, (weighted_count, sent, recorded)
