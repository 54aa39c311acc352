"""Interleaved bursts: what each of several live proxies costs per request, with the machine's drift shared.

Each proxy in turn gets a burst of exactly ``requests`` requests from
``concurrency`` closed-loop users, from idle until its last response; the
order rotates each round (ABBA for two). Each
proxy's CPU (its process tree, perfkit's export agents included and apart)
is read before its first burst and after the last round plus ``settle_s``,
so work done after the responses (LiteLLM's logging tasks, the agent's next
export) is charged too, and every request whose work was counted is counted.

Why bursts of a count, not windows of a duration: a saturated proxy serves
closed-loop users in lockstep waves, and a window's edges cut a wave, so
the requests it counted jumped by a wave while the CPU did not (up to 15%
per 3 s window between two identical LiteLLM proxies). Why interleaved: the
machine's speed drifts by 10-15% over seconds to minutes, which one proxy
measured after another takes for a difference (docs/overhead.md).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from .._load import LoadPlan, Workload, run_load
from .._stop import Stopped
from ..types import LoadSummary
from ._launch import TreeCpu, tree_cpu
from ._options import MODEL

__all__ = ["BURST_S", "Burst", "Served", "Target", "Turns", "burst", "burst_size", "load", "take_turns"]

BURST_S = 2.0
"""About how long a burst lasts when its size comes from a measured rate (``burst_size``)."""


class Target(NamedTuple):
    name: str
    url: str
    pid: int | None  # the process tree whose CPU is charged (None: not measured)


class Burst(NamedTuple):
    requests: int
    seconds: float  # from the first request sent to the last response


class Served(NamedTuple):
    """One target over its measured bursts."""

    requests: int
    seconds: float  # the bursts' wall time
    cpu_s: float | None  # the process tree, export agents included
    agent_cpu_s: float | None  # the export agents alone

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms(self) -> float | None:
        """CPU per request, export agents included."""
        return None if self.cpu_s is None or not self.requests else self.cpu_s / self.requests * 1e3

    @property
    def agent_ms(self) -> float | None:
        """The export agents' CPU per request."""
        return None if self.agent_cpu_s is None or not self.requests else self.agent_cpu_s / self.requests * 1e3


def load(url: str, stream: bool, plan: LoadPlan, prompt_repeats: int = 150, processes: int = 1) -> LoadSummary:
    """One run of the bench's model through perfkit's driver; a stop signal during it goes on (``Stopped``)."""
    # No traceparent: a sampled one is recorded beyond the record rate, and the perturbation measures that rate.
    workload = Workload(
        url=url, models=((MODEL, 1.0),), stream=stream, prompt_repeats=prompt_repeats, traceparent="off"
    )
    result = run_load(workload, plan, processes=processes, progress="off")
    if not result["complete"]:
        raise Stopped(int(signal.Signals[result.get("stopped_by", "SIGINT")]))
    return result["summary"]


def burst(
    url: str, stream: bool, requests: int, concurrency: int, prompt_repeats: int = 150, processes: int = 1
) -> Burst:
    """Exactly ``requests`` requests from ``concurrency`` users; raises RuntimeError if any failed."""
    summary = load(
        url,
        stream,
        LoadPlan(concurrency=concurrency, duration_s=None, requests=requests, timeout_s=60),
        prompt_repeats,
        processes,
    )
    if summary["errors"]:
        raise RuntimeError(f"{url}: {summary['errors']} of {requests} requests failed: {summary['errors_by_class']}")
    return Burst(summary["requests"], summary["requests"] / summary["rps"] if summary["rps"] else 0.0)


def burst_size(rps: float, concurrency: int) -> int:
    """Requests for a burst of about ``BURST_S`` at ``rps``: whole waves, every user sending as many."""
    return max(1, round(rps * BURST_S / concurrency)) * concurrency


def _cpu(pid: int | None) -> TreeCpu | None:
    return None if pid is None else tree_cpu(pid)


class Turns:
    """Each target's totals, and its CPU per request in each round (None: not measured)."""

    def __init__(self, totals: dict[str, Served], rounds: dict[str, list[float | None]]) -> None:
        self.totals, self.rounds = totals, rounds


def _own_cpu(pid: int | None) -> float | None:
    read = _cpu(pid)
    return None if read is None else read.own_s


def take_turns(
    targets: Sequence[Target],
    requests: int,
    concurrency: int,
    rounds: int,
    settle_s: float,
    prompt_repeats: int = 150,
    processes: int = 1,
    stream: bool = False,
    send: Callable[[Target], Burst] | None = None,
) -> Turns:
    """``rounds`` bursts of ``requests`` requests per target, taking turns; the order rotates
    (ABBA... for two), so a steady drift falls on all alike. ``send`` sends a target's burst
    when the caller keeps what each burst answered (default: ``burst``, which keeps its count).

    Besides the totals, the CPU is read around every burst: on a shared machine the
    CPU a request costs moves within a second with what else runs, and a spike that
    lands on one burst moves a total; a ratio per round (both sides' bursts back to
    back) and its median across rounds is robust to it."""
    before = {t.name: _cpu(t.pid) for t in targets}
    served = {t.name: [0, 0.0] for t in targets}
    per_round: dict[str, list[float | None]] = {t.name: [] for t in targets}
    for round_ in range(rounds):
        for target in list(targets[round_ % len(targets) :]) + list(targets[: round_ % len(targets)]):
            start = _own_cpu(target.pid)
            if send is None:
                done = burst(target.url, stream, requests, concurrency, prompt_repeats, processes)
            else:
                done = send(target)
            end = _own_cpu(target.pid)
            served[target.name][0] += done.requests
            served[target.name][1] += done.seconds
            cpu = None if start is None or end is None or not done.requests else (end - start) / done.requests * 1e3
            per_round[target.name].append(cpu)
    time.sleep(settle_s)
    totals = {}
    for target in targets:
        first, last = before[target.name], _cpu(target.pid)
        count, seconds = served[target.name]
        if first is None or last is None:
            totals[target.name] = Served(int(count), seconds, None, None)
        else:
            totals[target.name] = Served(
                int(count), seconds, last.total_s - first.total_s, last.agents_s - first.agents_s
            )
    return Turns(totals, per_round)
