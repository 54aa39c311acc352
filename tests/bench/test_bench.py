"""perfkit bench against gateways whose stage times are known."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from litellm_perfkit._bench import BenchOptions, run_bench
from litellm_perfkit._bench._render import render_bench
from litellm_perfkit._wire._names import AGENT_MODULE, OUTSIDE_WALL_STAGES
from tests.support.bench import short_bench
from tests.support.delay_gateway import DELAYS_MS
from tests.support.descendants import started_processes
from tests.support.documents import validate

ROOT = Path(__file__).resolve().parents[2]


def quick(**overrides: object) -> BenchOptions:
    """Two users a phase, 3 s repeats, and a fast mock: 5 chunks, 5 ms to the first and 1 ms apart."""
    load = {"concurrency": 2, "stream_concurrency": 2, "duration_s": 3.0, "warmup_s": 1.0, "prompt_repeats": 5}
    mock = {"ttft_ms": 5.0, "itl_ms": 1.0, "chunks": 5}
    return short_bench(**{**load, **mock, **overrides})


@pytest.mark.quiet
@pytest.mark.integration
def test_bench_recovers_injected_stage_delays(tmp_path: Path) -> None:
    command = (
        f"{sys.executable} {ROOT / 'tests' / 'support' / 'delay_gateway.py'} --port {{port}} --upstream {{upstream}}"
    )
    options = quick(proxy_command=command, idle_s=2.0)
    with started_processes() as started:
        document = run_bench(options)
    validate(document, "bench")
    # Nothing it started is left running: the mock, the gateway and its export agent were seen, and are gone.
    commands = [p.command for p in started.seen.values()]
    assert any("delay_gateway.py" in c for c in commands) and any(" mock " in c for c in commands), commands
    assert any(AGENT_MODULE in c for c in commands), commands
    left = started.alive
    assert not left, left
    # The gateway's CPU over the repeat: more than it spent on the requests
    # measured after warm-up (per request, times the requests), over at
    # most the whole bench, and no more than the machine has.
    percent, per_request = document["proxy"]["cpu_percent"], document["proxy"]["cpu_ms_per_request"]
    assert percent is not None and per_request is not None, document["proxy"]
    served = {"nonstream": document["samples"]["nonstream_latency_ms"], "stream": document["samples"]["stream_e2e_ms"]}
    measured_s = sum(per_request[phase] * len(served[phase][0]) for phase in served) / 1000
    floor, ceiling = 100 * measured_s / document["duration_s"], 100 * (os.cpu_count() or 1)
    assert floor <= percent <= ceiling, (percent, floor, ceiling)
    assert (
        "came back with the gateway's spans" not in options.log.getvalue()
    )  # it recorded and handed over every request
    # One user, no queueing: the non-streaming overhead is the injected stages (5 ms) and little else.
    idle = document["idle"]
    assert idle is not None and idle["requests"] > 20
    assert sum(DELAYS_MS.values()) <= idle["server_overhead_ms"]["p50"] <= sum(DELAYS_MS.values()) + 2.5, idle
    # The injected delays are sleeps: wall time in the stages, not CPU.
    cpu = document["proxy"]["cpu_ms_per_request"]
    assert 0 < cpu["nonstream"] < sum(DELAYS_MS.values()) and cpu["stream"] > 0, cpu
    agent = document["proxy"]["agent_cpu_ms_per_request"]  # the gateway exports through perfkit's agent (its default)
    assert agent is not None and set(agent) == set(cpu) and all(ms > 0 for ms in agent.values()), agent
    assert "perfkit's export agent CPU per request" in render_bench(document)
    own, named = document["proxy"]["steps_cpu_ms_per_request"], document["proxy"]["named_cpu_ms_per_request"]
    assert own is not None and named is not None and all(0 <= named[phase] <= own[phase] for phase in own), (own, named)
    stages = document["stages"]
    for name, expected in DELAYS_MS.items():
        measured = stages[name]["p50_ms"]
        assert abs(measured - expected) <= max(0.05 * expected, 0.2), (name, measured, expected)
    # Shares plus the remainder add up to the measured (server-side) overhead.
    shares = sum(s["share"] for s in stages.values() if s["share"] is not None) + document["remainder"]["share"]
    assert shares == pytest.approx(1.0, abs=1e-3)
    # Only stages within the request's wall time: the server's parsing before the app, the work after the
    # response and the event loop between steps (with PERFKIT_STEPS=cpu, as the bench runs it) are none of it.
    within = [s for name, s in stages.items() if not s["upstream"] and name not in OUTSIDE_WALL_STAGES]
    own = sum(s["mean_self_ms"] for s in within) + document["remainder"]["mean_ms"]
    assert own == pytest.approx(document["server_overhead_ms"]["mean"], rel=1e-3)
    assert document["joined_requests"] > 10
    assert stages["upstream"]["upstream"] is True
    assert "where the server-side overhead went" in render_bench(document)
    assert document["gc_pause_ms"]["mean"] >= 0 and document["gc_pause_ms"]["share"] is not None
    assert document["nonstream"]["rps"] > 0 and document["stream"]["streams_per_s"] > 0


def test_a_proxy_that_fails_to_start_gives_its_log(tmp_path: Path) -> None:
    from litellm_perfkit._bench._launch import StartError

    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('boom on port', sys.argv[1])\nsys.exit(3)\n")
    with pytest.raises(StartError, match=r"exited with code 3; its log ends:\n.*boom on port"):
        run_bench(quick(proxy_command=f"{sys.executable} {script} {{port}}"))


@pytest.mark.quiet
@pytest.mark.integration
def test_bench_through_locust_folds_its_entries_into_the_result() -> None:
    command = (
        f"{sys.executable} {ROOT / 'tests' / 'support' / 'delay_gateway.py'} --port {{port}} --upstream {{upstream}}"
    )
    document = run_bench(quick(proxy_command=command, driver="locust", processes=2, concurrency=4, duration_s=4.0))
    validate(document, "bench")
    assert document["driver"]["name"] == "locust" and document["driver"]["processes"] == 2
    entries = {(e["type"], e["name"]): e for e in document["locust"]["stream"]}
    streamed = entries[("POST", "/v1/chat/completions (stream)")]
    assert (
        streamed["failures"] == 0
        and entries[("TTFT", "/v1/chat/completions (stream)")]["requests"] == streamed["requests"]
    )
    # Server-Timing carries the stages finished before the headers: all of them without streaming.
    assert {("STAGE", name) for name in DELAYS_MS} <= {(e["type"], e["name"]) for e in document["locust"]["nonstream"]}
    # Locust's requests carry traceparent too: the gateway's spans join them.
    assert document["joined_requests"] > 10
    for name, expected in DELAYS_MS.items():
        assert abs(document["stages"][name]["p50_ms"] - expected) <= max(0.05 * expected, 0.2), name
    assert "locust, 2 process(es)" in render_bench(document)


@pytest.mark.integration
def test_bench_flamegraph_of_the_gateway_is_linked_from_the_report(
    tmp_path: Path, validate_speedscope: Callable[[dict[str, Any]], None]
) -> None:
    import json

    from litellm_perfkit._bench._report import render_html

    command = (
        f"{sys.executable} {ROOT / 'tests' / 'support' / 'delay_gateway.py'} --port {{port}} --upstream {{upstream}}"
    )
    document = run_bench(
        quick(proxy_command=command, flamegraph="speedscope", flamegraph_prefix=str(tmp_path / "bench"))
    )
    path = Path(document["flamegraph"])
    assert path.parent == tmp_path and path.name.endswith(".w1.speedscope.json")
    profile = json.loads(path.read_text())
    validate_speedscope(profile)
    assert any(f.get("file", "").endswith("delay_gateway.py") for f in profile["shared"]["frames"])
    page = render_html([("bench", document)], base=tmp_path)
    assert f'<a href="{path.name}">' in page
    # The waterfall splits each stage into CPU, queueing and waits (the injected delays are sleeps: CPU to perfkit).
    assert "event-loop queueing" in page and "(CPU " in page


def test_collector_pauses_are_summarised_beside_the_breakdown_not_in_it() -> None:
    from litellm_perfkit._bench._analysis import stage_breakdown

    def request(trace: str, gc_ms: float) -> list[dict[str, object]]:
        server = {"trace_id": trace, "kind": 2, "attrs": {"perfkit.overhead_ms": 20.0, "perfkit.unattributed_ms": 5.0}}
        if gc_ms:
            server["attrs"]["perfkit.gc_pause_ms"] = gc_ms  # type: ignore[index]
        auth = {
            "trace_id": trace,
            "kind": 1,
            "name": "auth",
            "attrs": {"perfkit.stage.duration_ms": 15.0, "perfkit.stage.self_ms": 15.0},
        }
        return [server, auth]

    spans = request("a", 0.0) + request("b", 10.0)
    result = stage_breakdown(spans, {"a", "b"})
    assert result["gc_pause_ms"] == {"mean": 5.0, "p95": 10.0, "max": 10.0, "share": 0.25}
    # The stages and the remainder still add up to the overhead on their own.
    assert result["stages"]["auth"]["share"] + result["remainder"]["share"] == pytest.approx(1.0)


@pytest.mark.quiet
@pytest.mark.integration
@pytest.mark.litellm
def test_bench_through_the_azure_provider_path_splits_out_the_upstream() -> None:
    """--provider azure: the embedded config reaches the mock as an Azure deployment;
    the provider's 80 ms is upstream, not overhead."""
    document = run_bench(quick(litellm_versions=("1.103.0",), provider="azure", ttft_ms=80.0, itl_ms=0.0, chunks=2))
    validate(document, "bench")
    assert document["nonstream"]["errors"] == 0 and document["stream"]["errors"] == 0
    assert document["unmeasured"] == {"upstream": 0, "auth": 0}
    # Non-streaming requests wait 80 ms in upstream; streams wait for their headers
    # in upstream and for their chunks in stream.upstream_wait.
    stages = document["stages"]
    assert stages["upstream"]["upstream"] and stages["stream.upstream_wait"]["upstream"]
    # A stream's headers come at once and its first chunk 80 ms after the request: the proxy's own work
    # between the two overlaps the wait, so the stream waits less than 80 ms (76.8-77.7 read at load 2).
    waited = stages["upstream"]["mean_self_ms"] + stages["stream.upstream_wait"]["mean_self_ms"]
    assert 70 <= waited <= 90, stages
    # Far below the 80 ms that an upstream leaking into the overhead would add to
    # every request: the overhead's median is less than what the client waited
    # less 60 ms (the proxy's own work, which grows on a slower machine, is in
    # both). The median, not the p95: at this small load the p95 read 41.7-61.4 ms
    # on a quiet machine, the median 21.7-29.6.
    waited_p50 = document["nonstream"]["latency_ms"]["p50"]
    assert document["server_overhead_ms"]["p50"] < waited_p50 - 60, (document["server_overhead_ms"], waited_p50)
