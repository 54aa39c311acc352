"""``perfkit bench --perturbation``: what perfkit costs the proxy it measures.

A pair is the same proxy and config started twice, fresh: plain, and under
``perfkit run`` at the record rate users run (its default unless
``--record-rate``; spans exported to the bench's receiver at perfkit's
default schedule). Both stay up while the pair is measured: for each phase
(non-streaming, streaming) each side warms up, then the two take turns
(ABBA) in bursts of the same exact number of requests (``_bursts``), so the
machine's drift falls on both alike and every request whose work was
counted is counted. A side's CPU per request is its process tree's over its
bursts and the export schedule after them, perfkit's export agents
included. Pairs start in alternating order. A proxy process keeps its own
speed for its life (plain against plain differ by a few percent), which
only more pairs average: a pair's ratio is perfkit / plain; the result is
the geometric mean of the pairs' ratios with a 95% bootstrap interval over
the pairs, and their median.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from pathlib import Path
from typing import Literal

from .._export._settings import read_settings
from .._stop import signal_name
from .._version import __version__
from ..types import PerturbationPair, PerturbationPhase, PerturbationResult, Ratio
from ._bursts import BURST_S, Target, burst_size, load, take_turns
from ._instances import proxy_bin
from ._launch import Children, start_litellm
from ._options import BenchError, BenchOptions, config_template
from ._phases import set_up, warmup_plan
from ._receiver import SpanReceiver

__all__ = ["format_ratio", "ratio", "render_perturbation", "run_perturbation"]

Side = Literal["plain", "perfkit"]
PhaseName = Literal["nonstream", "stream"]
PHASE_NAMES: tuple[PhaseName, ...] = ("nonstream", "stream")
ROUNDS = 2000


def ratio(pairs: list[tuple[float, float]], rounds: int = ROUNDS, seed: int = 1) -> Ratio:
    """perfkit / plain over (plain, perfkit) pairs: the geometric mean of
    the pairs' ratios, its 95% interval (the pairs resampled), their median."""
    logs = [math.log(b / a) for a, b in pairs]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(rounds))
    return {
        "geometric_mean": round(math.exp(statistics.fmean(logs)), 4),
        "low": round(math.exp(means[int(0.025 * rounds)]), 4),
        "high": round(math.exp(means[int(0.975 * rounds) - 1]), 4),
        "median": round(math.exp(statistics.median(logs)), 4),
        "pairs": len(pairs),
    }


def _settle_s() -> float:
    """How long after a phase the agents may still be exporting it: the schedule the proxy inherits, and a second."""
    return read_settings(os.environ).schedule_delay_s + 1.0


def _warm(url: str, stream: bool, concurrency: int, options: BenchOptions) -> float:
    """The phase's warm-up on one side (``--warmup``); its requests per second."""
    plan = warmup_plan(concurrency, options)
    return float(load(url, stream, plan, options.prompt_repeats, options.processes)["rps"])


def _pair(
    options: BenchOptions,
    children: Children,
    order: list[Side],
    receiver: SpanReceiver,
    upstream: str,
    workdir: Path,
    version: str | None,
    workers: int,
) -> PerturbationPair:
    """Both sides started (in ``order``), both phases measured in interleaved bursts; then both stopped."""
    litellm, perfkit = proxy_bin(version, options.say)
    template = Path(options.config).read_text() if options.config else config_template(options.provider)
    proxies = {}
    for side in order:
        options.say(f"starting the proxy {'under perfkit run' if side == 'perfkit' else 'plain'}")
        proxies[side] = start_litellm(
            children,
            litellm,
            perfkit,
            template.replace("{upstream}", upstream),
            workdir,
            workers=workers,
            mode=side,
            perfkit_args=(
                "--endpoint",
                receiver.endpoint,
                "--protocol",
                "http/protobuf",
                "--record-rate",
                options.record_rate,
            ),
            say=options.say,
        )
    targets = [Target(side, proxies[side].url, proxies[side].pid) for side in order]
    rounds = max(2, round(options.duration_s / BURST_S))
    pair: PerturbationPair = {"order": order, "nonstream": {}, "stream": {}}
    for name in PHASE_NAMES:
        stream = name == "stream"
        concurrency = options.stream_concurrency if stream else options.concurrency
        rates = [_warm(target.url, stream, concurrency, options) for target in targets]
        requests = burst_size(min(rates), concurrency)
        options.say(f"{name} phase: {rounds} bursts of {requests} requests on each side, taking turns")
        try:
            served = take_turns(
                targets, requests, concurrency, rounds, _settle_s(), options.prompt_repeats, options.processes, stream
            ).totals
        except RuntimeError as exc:
            raise BenchError(f"--perturbation, {name} phase: {exc}") from None
        for side in order:
            cpu, agent = served[side].cpu_ms, served[side].agent_ms
            pair[name][side] = {
                "rps": round(served[side].rps, 2),
                "cpu_ms_per_request": None if cpu is None else round(cpu, 4),
                "agent_cpu_ms_per_request": None if agent is None else round(agent, 4),
            }
        receiver.clear()
    for side in order:
        children.stop(proxies[side].child)
    return pair


def _phase_ratios(pairs: list[PerturbationPair], name: PhaseName) -> PerturbationPhase | None:
    rps = [(p[name]["plain"]["rps"], p[name]["perfkit"]["rps"]) for p in pairs]
    if not rps or not all(a > 0 and b > 0 for a, b in rps):
        return None
    cpu = [(p[name]["plain"]["cpu_ms_per_request"], p[name]["perfkit"]["cpu_ms_per_request"]) for p in pairs]
    known = [(a, b) for a, b in cpu if a and b]
    return {"cpu_ratio": ratio(known) if len(known) == len(cpu) else None, "rps_ratio": ratio(rps)}


def run_perturbation(options: BenchOptions) -> PerturbationResult:
    """``options.repeats`` pairs. A stop signal ends it early: the document
    then holds the pairs finished until then, marked incomplete."""
    if options.proxy_url or options.proxy_command:
        raise BenchError(
            "--perturbation starts the LiteLLM proxy plain and under perfkit run itself: "
            "drop --proxy-url and --proxy-command (use --litellm-version or --config)"
        )
    if len(options.litellm_versions) > 1 or len(options.workers) > 1:
        raise BenchError("--perturbation measures one proxy: give one --litellm-version and one --workers")
    if options.driver != "perfkit":
        raise BenchError(
            "--perturbation sends bursts of an exact number of requests with perfkit's own driver: drop --driver locust"
        )
    version = options.litellm_versions[0] if options.litellm_versions else None
    workers = options.workers[0]
    started = time.time()
    pairs: list[PerturbationPair] = []
    stop: KeyboardInterrupt | None = None
    with set_up(options, "perfkit-perturbation-") as (workdir, receiver, children, upstream):
        for number in range(options.repeats):
            order: list[Side] = ["plain", "perfkit"] if number % 2 == 0 else ["perfkit", "plain"]
            options.say(f"pair {number + 1} of {options.repeats}")
            try:
                pairs.append(_pair(options, children, order, receiver, upstream, workdir, version, workers))
            except KeyboardInterrupt as exc:
                stop = exc
                break
    if not pairs and stop is not None:
        raise stop
    document: PerturbationResult = {
        "schema": "perfkit.perturbation/1",
        "complete": stop is None,
        "tool": {"name": "perfkit bench --perturbation", "version": __version__},
        "created_unix": int(started),
        "duration_s": round(time.time() - started, 1),
        "litellm_version": version,
        "workers": workers,
        "config": options.recorded(),
        "pairs": pairs,
        "nonstream": _phase_ratios(pairs, "nonstream"),
        "stream": _phase_ratios(pairs, "stream"),
    }
    if stop is not None:
        document["stopped_by"] = signal_name(stop)
    return document


def format_ratio(value: Ratio | None) -> str:
    """The geometric mean, its 95% interval and the median; - when unknown."""
    if value is None:
        return "-"
    return f"{value['geometric_mean']:.3f} [{value['low']:.3f}, {value['high']:.3f}] (median {value['median']:.3f})"


def render_perturbation(document: PerturbationResult) -> str:
    """Each phase's medians per side and the ratios with their intervals."""
    version = document["litellm_version"] or "installed"
    rate = document["config"].get("record_rate", "all")  # documents from before the record rate recorded every request
    lines = [
        f"perturbation: LiteLLM {version}, {document['workers']} worker(s), {len(document['pairs'])} interleaved pairs "
        f"(perfkit run --record-rate {rate} vs plain; spans exported)",
        "",
    ]
    lines.append(f"{'phase':<10} {'metric':<24} {'plain':>9} {'perfkit':>9}  perfkit / plain, 95% interval")
    for name in PHASE_NAMES:
        result = document[name]
        if result is None:
            continue
        sides = [[p[name][side] for p in document["pairs"]] for side in ("plain", "perfkit")]
        rps = [statistics.median(s["rps"] for s in measured) for measured in sides]
        cpu = [statistics.median(s["cpu_ms_per_request"] or 0.0 for s in measured) for measured in sides]
        agent = statistics.median(s["agent_cpu_ms_per_request"] or 0.0 for s in sides[1])
        lines.append(f"{name:<10} {'req/s':<24} {rps[0]:>9.1f} {rps[1]:>9.1f}  {format_ratio(result['rps_ratio'])}")
        lines.append(
            f"{name:<10} {'CPU ms per request':<24} {cpu[0]:>9.3f} {cpu[1]:>9.3f}  {format_ratio(result['cpu_ratio'])}"
        )
        lines.append(f"{name:<10} {'  of which export agent':<24} {'':>9} {agent:>9.3f}")
    if len(document["pairs"]) < 4:
        lines.append("\nfewer than 4 pairs: the intervals cannot see run-to-run noise well; use --repeats 8")
    return "\n".join(lines)
