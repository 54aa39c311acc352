"""``perfkit bench --headline plain``: the headline from a proxy perfkit does not touch.

Beside the proxy under ``perfkit run`` (every request recorded, joined to its
spans for the stage attribution), the bench starts the same LiteLLM with the
same config, workers and mock, plain. In each phase both warm up, then take
turns in bursts of the same number of requests (``_bursts.take_turns``: ABBA,
so the machine's drift falls on both alike). The plain proxy's bursts, pooled,
give the headline (RPS, latency, CPU per request); the recorded proxy's give
the stages. Each round (one burst on each, back to back) is a pair: perfkit's
own cost is recorded / plain, CPU per request and RPS, with a 95% interval
over the rounds (``_perturbation.ratio``). A proxy's CPU for a round runs
from its burst's start to its next burst's start (the last: until the spans
are in), so the export agent's work after a burst is charged to that burst.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._load import LoadPlan
from .._load._recorder import Recorder
from .._load._report import build_result
from ..types import BenchCost, BenchCostPhase, BenchCostSide, LoadResult
from ._analysis import requests_cpu_per_request, stage_breakdown
from ._bursts import Burst, Target, burst_size, take_turns
from ._instances import Instance
from ._launch import TreeCpu, tree_cpu, tree_usage
from ._options import BenchOptions
from ._perturbation import ratio
from ._phases import PHASES, SPANS_WAIT_S, add_samples, load, received, records, warmup_plan, workload
from ._receiver import SpanReceiver
from ._summary import Repeat, Rounds, Samples

__all__ = ["RECORD_RATE", "perfkit_cost", "plain_headline_refused", "pooled", "repeat"]

RECORD_RATE = "all"
"""What the bench's recorded proxy records (``_instances.start_proxy``)."""


def plain_headline_refused(options: BenchOptions) -> str | None:
    """Why these options keep the recorded proxy's headline (None: the plain one can run beside it)."""
    if options.headline == "recorded":
        return None
    if options.proxy_url or options.proxy_command:
        return "a gateway the bench does not start has no plain twin"
    if options.deployment != "plain" or options.instances > 1 or options.scenario != "fake-endpoint":
        return "--deployment, --instances and --scenario share state a plain twin would change"
    if options.driver != "perfkit":
        return "the turns are bursts of an exact number of requests, sent by perfkit's own driver"
    return None


@dataclass
class _Side:
    """One proxy's bursts in a phase."""

    target: Target
    results: list[LoadResult] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    # Its tree's CPU s as each burst began: export agents included, and the agents' alone.
    cpu_at_start: list[TreeCpu] = field(default_factory=list)

    def round_cpu_ms(self, cpu_at_end: float) -> list[float]:
        """CPU per request of each burst, from its start to the next one's (the last: to ``cpu_at_end``)."""
        starts = [cpu.total_s for cpu in self.cpu_at_start]
        return [
            (end - start) * 1e3 / r["summary"]["requests"]
            for start, end, r in zip(starts, [*starts[1:], cpu_at_end], self.results, strict=True)
        ]

    def cpu_ms(self, cpu_at_end: float, agents: bool = False) -> float:
        """CPU per request over all its bursts and what followed them (``agents``: the export agents' alone)."""
        first = self.cpu_at_start[0].agents_s if agents else self.cpu_at_start[0].total_s
        return (cpu_at_end - first) * 1e3 / sum(r["summary"]["requests"] for r in self.results)

    def rps(self) -> float:
        """Its answered requests over its bursts' own wall time, as the pooled load's."""
        seconds = sum(r["summary"]["duration_s"] for r in self.results)
        return sum(r["summary"]["ok"] for r in self.results) / seconds if seconds else 0.0

    def round_rps(self) -> list[float]:
        return [r["summary"]["rps"] for r in self.results]


def pooled(results: list[LoadResult]) -> LoadResult:
    """A side's bursts as one load: their exact histograms merged, their counts
    added, their rate over their summed durations (the load driver's own builder)."""
    recorder = Recorder()
    for result in results:
        summary = result["summary"]
        recorder.merge_dict(
            {
                "histograms": result["histograms"],
                "errors": summary["errors_by_class"],
                "error_examples": {name: error["example"] for name, error in result["errors"].items()},
                "requests": summary["requests"],
                "ok": summary["ok"],
                "output_tokens": summary["output_tokens"]["total"],
                "token_sources": {summary["output_tokens"]["source"]: summary["ok"]},
            }
        )
    seconds = sum(r["summary"]["duration_s"] for r in results)
    driver_cpu = sum(r["summary"]["driver"]["cpu_s"] for r in results)
    config = results[0]["config"]
    return build_result(recorder, seconds, driver_cpu, seconds, int(config["processes"]), config)


def _turns(
    name: str, stream: bool, plain: Target, recorded: Target, options: BenchOptions, workdir: Path
) -> tuple[dict[str, _Side], Rounds]:
    """One phase: both sides warmed up, then their bursts, taking turns (ABBA) until both together took ``--duration``."""
    concurrency = options.stream_concurrency if stream else options.concurrency
    options.say(
        f"proxy, {name} phase ({options.duration_s:g} s, {concurrency} users; plain and recorded taking turns in bursts)"
    )
    quiet = dataclasses.replace(options, progress="off")
    plan = warmup_plan(concurrency, options)
    rates = [load(workload(t.url, stream, options), plan, quiet)["summary"]["rps"] for t in (plain, recorded)]
    requests = burst_size(min(rates), concurrency)
    options.say(f"{name} bursts: {requests} requests each, after both proxies' warm-up")
    sides = {t.name: _Side(t) for t in (plain, recorded)}
    plan = LoadPlan(concurrency=concurrency, duration_s=None, requests=requests, timeout_s=60)

    def send(target: Target) -> Burst:
        side = sides[target.name]
        side.cpu_at_start.append(_cpu(target.pid))
        jsonl = workdir / f"{name}-{target.name}-{time.monotonic_ns()}.jsonl"
        result = load(workload(target.url, stream, options), plan, quiet, str(jsonl))
        side.results.append(result)
        side.records += records(jsonl)
        summary = result["summary"]
        return Burst(summary["requests"], summary["duration_s"])

    # Whole ABBA cycles, as many as fit: the warm-up's rate is too rough to count them in advance.
    started = time.monotonic()
    while not sides["plain"].results or time.monotonic() - started < options.duration_s:
        take_turns([plain, recorded], requests, concurrency, 2, 0.0, stream=stream, send=send)
    time.sleep(SPANS_WAIT_S)  # the recorded proxy's last spans, and its agent's work for them
    at_end = {t.name: _cpu(t.pid) for t in (plain, recorded)}
    measured = plain.pid is not None and recorded.pid is not None
    cpu = {t.name: sides[t.name].round_cpu_ms(at_end[t.name].total_s) for t in (plain, recorded)}

    def side(target: Target) -> BenchCostSide:
        bursts = sides[target.name]
        return {
            "rps": round(bursts.rps(), 2),
            "cpu_ms_per_request": round(bursts.cpu_ms(at_end[target.name].total_s), 4) if measured else None,
            "agent_cpu_ms_per_request": round(bursts.cpu_ms(at_end[target.name].agents_s, agents=True), 4)
            if measured
            else None,
        }

    return sides, {
        "burst_requests": requests,
        "plain": side(plain),
        "recorded": side(recorded),
        "cpu_pairs": list(zip(cpu[plain.name], cpu[recorded.name], strict=True)) if measured else None,
        "rps_pairs": list(zip(sides[plain.name].round_rps(), sides[recorded.name].round_rps(), strict=True)),
    }


def _cpu(pid: int | None) -> TreeCpu:
    """A proxy's tree CPU (zeros when not measured)."""
    return tree_cpu(pid) if pid else TreeCpu(0.0, 0.0)


def repeat(recorded: Instance, plain: Instance, options: BenchOptions, receiver: SpanReceiver, workdir: Path) -> Repeat:
    """Both phases once, the two proxies taking turns: the plain one's figures, the recorded one's spans."""
    plain_target = Target("plain", plain.url, plain.child.process.pid)
    recorded_target = Target("recorded", recorded.url, recorded.child.process.pid)
    phases: dict[str, LoadResult] = {}
    cost: dict[str, Rounds] = {}
    phase_ids: dict[str, set[str]] = {}
    samples: Samples = {"nonstream_latency_ms": [], "stream_ttft_ms": [], "stream_e2e_ms": []}
    plain_cpu_ms: dict[str, float] = {}
    plain_cpu_s = plain_seconds = 0.0
    for name, stream in PHASES:
        sides, rounds = _turns(name, stream, plain_target, recorded_target, options, workdir)
        cost[name] = rounds
        phases[name] = pooled(sides["plain"].results)
        phase_ids[name] = {r["trace_id"] for r in sides["recorded"].records}
        add_samples(samples, sides["plain"].records, stream)
        per_request = rounds["plain"]["cpu_ms_per_request"]
        if per_request is not None:
            plain_cpu_ms[name] = per_request
            plain_cpu_s += per_request * phases[name]["summary"]["requests"] / 1e3
        plain_seconds += phases[name]["summary"]["duration_s"]
    trace_ids = set().union(*phase_ids.values())
    spans = received(receiver, options, trace_ids)
    own_cpu, named_cpu = requests_cpu_per_request(spans, phase_ids)
    return {
        "nonstream": phases["nonstream"],
        "stream": phases["stream"],
        "samples": samples,
        "proxy": {
            "cpu_percent": round(plain_cpu_s / plain_seconds * 100, 1) if plain_cpu_ms and plain_seconds else None,
            "rss_mb": round(tree_usage(plain.child.process.pid)[1], 1),
            "cpu_ms_per_request": plain_cpu_ms or None,
            "steps_cpu_ms_per_request": own_cpu,
            "named_cpu_ms_per_request": named_cpu,
            "agent_cpu_ms_per_request": None,
        },
        "breakdown": stage_breakdown(spans, trace_ids),
        "cost": cost,
    }


def _phase_cost(rounds: list[Rounds]) -> BenchCostPhase | None:
    if not rounds:
        return None
    rps = [(a, b) for r in rounds for a, b in r["rps_pairs"] if a > 0 and b > 0]
    if not rps:  # every burst of a side failed: no rate to compare
        return None
    cpu = [pair for r in rounds for pair in (r["cpu_pairs"] or [])]
    known = all(r["cpu_pairs"] is not None for r in rounds) and all(a > 0 and b > 0 for a, b in cpu)

    def side(name: str) -> BenchCostSide:
        values = [r[name] for r in rounds]  # type: ignore[literal-required]
        cpu_ms = [v["cpu_ms_per_request"] for v in values]
        agent = [v["agent_cpu_ms_per_request"] for v in values]
        return {
            "rps": round(sum(v["rps"] for v in values) / len(values), 2),
            "cpu_ms_per_request": None if None in cpu_ms else round(sum(cpu_ms) / len(cpu_ms), 4),
            "agent_cpu_ms_per_request": None if None in agent else round(sum(agent) / len(agent), 4),
        }

    return {
        "burst_requests": rounds[0]["burst_requests"],
        "rounds": len(rps),
        "plain": side("plain"),
        "recorded": side("recorded"),
        "cpu_ratio": ratio(cpu) if known and cpu else None,
        "rps_ratio": ratio(rps),
    }


def perfkit_cost(repeats: list[Repeat]) -> BenchCost:
    """perfkit's own cost over every repeat's rounds, by phase."""
    return {
        "record_rate": RECORD_RATE,
        "nonstream": _phase_cost([r["cost"]["nonstream"] for r in repeats if "cost" in r]),
        "stream": _phase_cost([r["cost"]["stream"] for r in repeats if "cost" in r]),
    }
