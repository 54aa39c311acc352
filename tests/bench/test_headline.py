"""perfkit bench's plain headline (_bench/_headline.py): pooled bursts, a round's CPU, perfkit's cost row."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, cast

import pytest

from litellm_perfkit._bench import BenchOptions, run_bench
from litellm_perfkit._bench._bursts import Target
from litellm_perfkit._bench._headline import _phase_cost, _Side, plain_headline_refused, pooled
from litellm_perfkit._bench._launch import Children, TreeCpu, start_mock
from litellm_perfkit._bench._perturbation import ratio
from litellm_perfkit._bench._phases import load, workload
from litellm_perfkit._bench._render import render_bench
from litellm_perfkit._bench._summary import Rounds
from litellm_perfkit._load import LoadPlan
from litellm_perfkit._load._hdr import Histogram
from litellm_perfkit.types import LoadResult
from tests.bench.test_bench import quick
from tests.support.documents import validate

pytestmark = pytest.mark.quiet

QUIET = BenchOptions(prompt_repeats=1, progress="off", log=io.StringIO())


def test_a_sides_bursts_pool_into_one_load_with_their_exact_histograms() -> None:
    with Children() as children:
        url = start_mock(children, "--ttft-ms", "2", "--itl-ms", "0", "--chunks", "2", timeout_s=20)
        bursts = [
            load(workload(url, stream, QUIET), LoadPlan(concurrency=3, duration_s=None, requests=n), QUIET)
            for n, stream in ((12, False), (30, False))
        ]
    result = pooled(bursts)
    summary = result["summary"]
    assert summary["requests"] == 42 and summary["ok"] == 42 and summary["errors"] == 0
    seconds = sum(b["summary"]["duration_s"] for b in bursts)
    assert summary["duration_s"] == pytest.approx(seconds, abs=1e-3)
    assert summary["rps"] == pytest.approx(42 / seconds, rel=1e-3)  # over the bursts' own time, not the gaps
    merged = Histogram()
    for b in bursts:
        merged.merge(Histogram.from_dict(b["histograms"]["latency"]))
    assert summary["latency_ms"] == merged.summary_ms()
    assert summary["latency_ms"] is not None and summary["latency_ms"]["count"] == 42


def _burst(requests: int, seconds: float) -> LoadResult:
    summary = {"requests": requests, "ok": requests, "duration_s": seconds, "rps": requests / seconds}
    return cast(LoadResult, {"summary": summary})


def test_a_rounds_cpu_runs_from_its_bursts_start_to_the_next_ones() -> None:
    side = _Side(
        Target("recorded", "u", 1),
        results=[_burst(10, 2.0), _burst(20, 2.5)],
        cpu_at_start=[TreeCpu(1.0, 0.1), TreeCpu(1.5, 0.2)],
    )
    # 0.5 s over the first burst and what followed it (the agent's export), 0.4 s over the last until the end.
    assert side.round_cpu_ms(1.9) == pytest.approx([50.0, 20.0])
    assert side.cpu_ms(1.9) == pytest.approx(900 / 30)
    assert side.cpu_ms(0.4, agents=True) == pytest.approx(300 / 30)  # the agents' alone
    assert side.round_rps() == [5.0, 8.0]
    assert side.rps() == pytest.approx(30 / 4.5)  # over the bursts' own time, not the other side's


def _rounds(plain_cpu: float, recorded_cpu: float, pairs: list[tuple[float, float]] | None) -> Rounds:
    return {
        "burst_requests": 40,
        "plain": {"rps": 100.0, "cpu_ms_per_request": plain_cpu, "agent_cpu_ms_per_request": 0.0},
        "recorded": {"rps": 90.0, "cpu_ms_per_request": recorded_cpu, "agent_cpu_ms_per_request": 0.5},
        "cpu_pairs": pairs,
        "rps_pairs": [(100.0, 90.0), (110.0, 99.0)],
    }


def test_perfkit_cost_pairs_the_rounds_of_every_repeat() -> None:
    first = _rounds(10.0, 11.0, [(10.0, 11.0), (10.0, 12.0)])
    second = _rounds(12.0, 13.0, [(12.0, 13.0), (11.0, 12.0)])
    cost = _phase_cost([first, second])
    assert cost is not None and cost["rounds"] == 4 and cost["burst_requests"] == 40
    assert cost["cpu_ratio"] == ratio([(10.0, 11.0), (10.0, 12.0), (12.0, 13.0), (11.0, 12.0)])
    assert cost["rps_ratio"]["geometric_mean"] == pytest.approx(0.9) and cost["rps_ratio"]["pairs"] == 4
    assert cost["plain"]["cpu_ms_per_request"] == 11.0 and cost["recorded"]["agent_cpu_ms_per_request"] == 0.5
    # Without /proc the CPU is unknown: no ratio is made up.
    unknown = _phase_cost([_rounds(10.0, 11.0, None)])
    assert unknown is not None and unknown["cpu_ratio"] is None and unknown["rps_ratio"]["pairs"] == 2
    assert _phase_cost([]) is None


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({}, None),
        ({"headline": "recorded"}, None),
        ({"proxy_url": "http://127.0.0.1:9"}, "no plain twin"),
        ({"proxy_command": "gateway --port {port}"}, "no plain twin"),
        ({"deployment": "postgres"}, "--deployment"),
        ({"instances": 2}, "--instances"),
        ({"scenario": "rate-limited-deployments"}, "--scenario"),
        ({"driver": "locust"}, "perfkit's own driver"),
    ],
)
def test_the_plain_headline_is_kept_where_a_plain_twin_can_run(overrides: dict[str, Any], reason: str | None) -> None:
    refused = plain_headline_refused(BenchOptions(**overrides))
    assert (refused is None) if reason is None else (refused is not None and reason in refused), refused


@pytest.mark.integration
@pytest.mark.litellm
def test_the_headline_is_the_plain_proxys_and_the_stages_the_recorded_ones(tmp_path: Path) -> None:
    # The quick bench's load, long enough for a few rounds a phase.
    options = quick(litellm_versions=("1.103.0",), concurrency=4, stream_concurrency=4, duration_s=8.0)
    document = run_bench(options)
    validate(document, "bench")
    assert document["headline"] == "plain" and "its plain twin" in options.log.getvalue()
    cost = document["perfkit_cost"]
    assert cost["record_rate"] == "all"
    for name, rps in (("nonstream", document["nonstream"]["rps"]), ("stream", document["stream"]["streams_per_s"])):
        phase = cost[name]  # type: ignore[literal-required]
        assert phase is not None and phase["rounds"] >= 2, cost
        # The headline is the plain proxy's bursts, pooled.
        assert rps == pytest.approx(phase["plain"]["rps"], rel=0.01), (name, rps, phase)
        assert document["proxy"]["cpu_ms_per_request"] is not None
        assert document["proxy"]["cpu_ms_per_request"][name] == phase["plain"]["cpu_ms_per_request"]
        # Only the recorded proxy has an export agent (its CPU is read in 10 ms ticks: a short run may
        # read none); perfkit's cost has an interval.
        assert phase["plain"]["agent_cpu_ms_per_request"] == 0.0
        assert phase["recorded"]["agent_cpu_ms_per_request"] is not None
        for found in (phase["rps_ratio"], phase["cpu_ratio"]):
            assert found is not None and found["low"] <= found["geometric_mean"] <= found["high"], found
    # The stages are the recorded proxy's requests, every one joined to its spans.
    recorded = sum(cost[n]["rounds"] * cost[n]["burst_requests"] for n in ("nonstream", "stream"))  # type: ignore[index]
    assert document["joined_requests"] == recorded
    assert document["stages"]["upstream"]["upstream"] is True
    text = render_bench(document)
    assert "perfkit's own cost (--record-rate all against plain" in text
    assert "RPS, latency and proxy CPU from a plain proxy" in text
