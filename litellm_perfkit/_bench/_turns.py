"""A pair's sides taking turns (ABBA) in short bursts, each burst's CPU read around it.

``_bursts.interleave`` charges each side its CPU over all its bursts. On a shared
machine the CPU a request costs moves within a second with what else runs (other
processes' time slices evict its caches), and a spike that lands on one burst
moves that total. Reading the CPU around every burst gives a ratio per round
(the two sides' bursts back to back, the order rotating): their median is
what a pair reports, robust to a spike; the totals (read from before the first
burst to after the last and ``settle_s``, so work after the responses is charged)
give each side's level.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ._bursts import Served, Target, _cpu, burst

__all__ = ["Turns", "take_turns"]


class Turns:
    """Each target's totals, and its CPU per request in each round (None: not measured)."""

    def __init__(self, totals: dict[str, Served], rounds: dict[str, list[float | None]]) -> None:
        self.totals, self.rounds = totals, rounds


def _own_cpu(pid: int | None) -> float | None:
    read = _cpu(pid)
    return None if read is None else read[0] - read[1]


def take_turns(
    targets: Sequence[Target],
    requests: int,
    concurrency: int,
    rounds: int,
    settle_s: float,
    prompt_repeats: int = 150,
    processes: int = 1,
) -> Turns:
    """``rounds`` bursts of ``requests`` non-streaming requests per target, taking turns."""
    before = {t.name: _cpu(t.pid) for t in targets}
    served = {t.name: [0, 0.0] for t in targets}
    per_round: dict[str, list[float | None]] = {t.name: [] for t in targets}
    for round_ in range(rounds):
        # Rotating the order: each target goes first in turn (ABBA... for two), so a steady drift falls on all alike.
        for target in list(targets[round_ % len(targets) :]) + list(targets[: round_ % len(targets)]):
            start = _own_cpu(target.pid)
            done = burst(target.url, False, requests, concurrency, prompt_repeats, processes)
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
            totals[target.name] = Served(int(count), seconds, last[0] - first[0], last[1] - first[1])
    return Turns(totals, per_round)
