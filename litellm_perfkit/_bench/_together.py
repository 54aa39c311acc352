"""Bursts sent to two proxies at once: each proxy's CPU per request over the same moments.

Taking turns (``_bursts.take_turns``) shares the machine's drift over seconds;
on a shared machine the CPU a request costs also moves within a second (what
else runs on the other core, in the caches), and one side's burst meets a
neighbour the other's missed. Sent together, to proxies pinned to one CPU, the
two sides' requests interleave at the scheduler's pace, so each side pays
for the same neighbours: the ratio of their CPU per request keeps little of
the machine's noise.

Which side's users are started first in a round moves the ratio: the side
sent second costs more per request, 17% on the ratio of 8 pairs of two
LiteLLM releases (docs/bench.md#the-order-of-a-pair). ``order`` keeps the targets' order
every round (``"fixed"``: pairs alternate it, and the comparison models it)
or reverses it every other round (``"alternating"``, for
``benchmarks/pair_order.py``).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Sequence
from typing import Literal

from .._load import LoadPlan, Workload
from .._load._runner import PhaseResult, run_phase
from .._stop import Stopped, run_until_stopped
from ._bursts import Served, Target, Turns
from ._launch import tree_cpu
from ._options import MODEL

__all__ = ["SendOrder", "send_together"]

SendOrder = Literal["fixed", "alternating"]


def send_together(
    targets: Sequence[Target],
    requests: int,
    concurrency: int,
    rounds: int,
    settle_s: float,
    prompt_repeats: int,
    order: SendOrder = "fixed",
) -> Turns:
    """``rounds`` bursts of exactly ``requests`` non-streaming requests to every target at once,
    ``concurrency`` users each, the first target's users started first (``order``); each target's
    CPU (its process tree, export agents apart) read around every round and around them all plus
    ``settle_s``. Raises RuntimeError if a request failed."""
    pids = {t.name: t.pid for t in targets}
    if any(pid is None for pid in pids.values()):
        raise ValueError("every target of bursts sent together needs a process to charge")
    before = {name: tree_cpu(pid) for name, pid in pids.items() if pid}
    served = {t.name: [0, 0.0] for t in targets}
    per_round: dict[str, list[float | None]] = {t.name: [] for t in targets}
    plan = LoadPlan(concurrency=concurrency, duration_s=None, requests=requests, timeout_s=60)
    workloads = [
        Workload(url=t.url, models=((MODEL, 1.0),), stream=False, prompt_repeats=prompt_repeats, traceparent="off")
        for t in targets
    ]
    for number in range(rounds):
        start = {name: tree_cpu(pid).own_s for name, pid in pids.items() if pid}
        results: list[PhaseResult] = []
        reverse = order == "alternating" and number % 2 == 1
        stopped_by = run_until_stopped(_phases(workloads[::-1] if reverse else workloads, plan, results))
        if reverse:
            results.reverse()
        if stopped_by is not None:
            raise Stopped(int(signal.Signals[stopped_by]))
        for target, result in zip(targets, results, strict=True):
            recorder = result.recorder
            if recorder.errors:
                raise RuntimeError(
                    f"{target.url}: {sum(recorder.errors.values())} of {requests} requests failed: {dict(recorder.errors)}"
                )
            assert target.pid is not None
            cpu_s = tree_cpu(target.pid).own_s - start[target.name]
            served[target.name][0] += recorder.requests
            served[target.name][1] += result.duration_s
            per_round[target.name].append(cpu_s / recorder.requests * 1e3 if recorder.requests else None)
    time.sleep(settle_s)
    totals = {}
    for name, pid in pids.items():
        assert pid is not None
        first, last = before[name], tree_cpu(pid)
        count, seconds = served[name]
        totals[name] = Served(int(count), seconds, last.total_s - first.total_s, last.agents_s - first.agents_s)
    return Turns(totals, per_round)


async def _phases(workloads: Sequence[Workload], plan: LoadPlan, results: list[PhaseResult]) -> None:
    """One round: each workload's phase, started in order (gather makes their tasks in turn: the first sends first)."""
    results.extend(await asyncio.gather(*(run_phase(workload, plan) for workload in workloads)))
