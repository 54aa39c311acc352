"""The statistics of paired measurements: a ratio with its interval, and the smallest step a setting resolves.

Each pair gives the log of upper / lower. Their spread is the pair noise: a
proxy process keeps its own speed for its life, so two fresh pairs of the
same releases differ by a few percent. The noise is pooled over every
comparison measured with the same settings (it does not depend on the
releases' levels, being relative), so a comparison of two pairs still has an
honest interval (Student's t for the pooled degrees of freedom). A step is
resolved at 95% when it exceeds the half-width of its comparison's interval:
that half-width is the smallest step the comparison could have seen.

The pairs take turns at which side starts, warms and bursts first, and that
order moves a pair's ratio by itself (LiteLLM pairs: 2-12% between the two
orders, its sign the same within a run and not between runs). Once each
order has two pairs, the order is treated as the period of a two-period
crossover trial: the ratio is the mean of the two orders' means, which
cancels an order effect of either sign, and the noise is the spread within
each order, which the effect does not widen. Until then (a bisect's
comparisons of two or three pairs) the pairs are one group: the plain mean,
the order effect left in the noise, where it widens the interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import TypedDict

from ._pairs import PairMetric, PairReading, Sides, value

__all__ = [
    "PRIOR_NOISE",
    "Noise",
    "Ratio",
    "log_ratios",
    "pairs_for",
    "pooled_noise",
    "ratio",
    "resolution",
    "stage_moves",
]

PRIOR_NOISE = 0.015
"""The pair noise assumed before any pair of these settings was measured: the
standard deviation of one pair's log ratio (the bursts harness resolved about
±1.5% with 4 pairs of LiteLLM proxies on a shared 2-core machine, docs/bench.md)."""

# Student's t, two-sided 95%, by degrees of freedom.
_T95 = ((1, 12.71), (2, 4.30), (3, 3.18), (4, 2.78), (5, 2.57), (6, 2.45), (8, 2.31), (10, 2.23), (15, 2.13))
_T95_MORE = ((20, 2.09), (30, 2.04), (60, 2.00))
_Z95 = 1.96


def t95(freedom: int) -> float:
    for limit, t in (*_T95, *_T95_MORE):
        if freedom <= limit:
            return t
    return _Z95


class Noise(TypedDict):
    sd: float  # of one pair's log ratio
    freedom: int  # 0: assumed (PRIOR_NOISE), nothing measured yet


class Ratio(TypedDict):
    """upper / lower over the pairs of one comparison."""

    ratio: float  # the geometric mean of the pairs' ratios
    interval: tuple[float, float]  # 95%
    difference: float  # upper - lower in the metric's unit: the ratio applied to the lower side's mean
    difference_interval: tuple[float, float]
    resolution: float  # the smallest step this comparison resolves at 95%, relative (the interval's half-width)
    pairs: int


def log_ratio(reading: PairReading, metric: PairMetric) -> float:
    """One pair's log of upper / lower, from each side's totals over all its bursts (its CPU
    and the settle after them, over its requests): the mean cost per request, lumps included.

    Not the median of the pair's per-round ratios (``cpu_log_ratio``, journaled beside the
    totals): a cost that comes in lumps further apart than a round (a full collection of
    a large heap: LiteLLM's take 0.3-0.4 s, a few every 15 s) lands in few rounds, which
    a median leaves out, so it read 1.103.0 / 1.83.14 about 7% under the totals
    (tests/bench/test_sweep_pairs.py injects such lumps; docs/bench.md). A spike of the
    machine's load falls on both sides of a pair at once (their bursts are sent together)."""
    return math.log(value(reading["upper"], metric) / value(reading["lower"], metric))


def log_ratios(readings: Iterable[PairReading], metric: PairMetric) -> dict[Sides, list[float]]:
    """The pairs' log ratios, by the side that started first."""
    orders: dict[Sides, list[float]] = {}
    for reading in readings:
        orders.setdefault(reading["first"], []).append(log_ratio(reading, metric))
    return orders


def _groups(orders: dict[Sides, list[float]]) -> list[list[float]]:
    """The log ratios by order once each order has two pairs (its effect can be told from the
    noise), else all in one group."""
    if all(len(logs) >= 2 for logs in orders.values()):
        return list(orders.values())
    return [[log for logs in orders.values() for log in logs]]


def pooled_noise(comparisons: Iterable[dict[Sides, list[float]]]) -> Noise:
    """The pair noise pooled over comparisons (their pairs' log ratios by order), each pair taken
    from its group's mean (``_groups``); the prior when no group of any comparison has two pairs."""
    squares, freedom = 0.0, 0
    for orders in comparisons:
        for logs in _groups(orders):
            mean = statistics.fmean(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            freedom += len(logs) - 1
    if not freedom:
        return {"sd": PRIOR_NOISE, "freedom": 0}
    return {"sd": math.sqrt(squares / freedom), "freedom": freedom}


def _half_width(noise: Noise, pairs: float) -> float:
    """Of the mean log ratio over ``pairs`` pairs (or as many as an uneven split between the
    orders is worth): the prior taken as known (z) until measured."""
    t = t95(noise["freedom"]) if noise["freedom"] else _Z95
    return t * noise["sd"] / math.sqrt(pairs)


def resolution(noise: Noise, pairs: int) -> float:
    """The smallest relative step ``pairs`` pairs resolve at 95% with this noise."""
    return math.exp(_half_width(noise, pairs)) - 1


def pairs_for(target: float, noise: Noise, least: int, most: int) -> int:
    """The fewest pairs (from ``least`` to ``most``) that resolve a relative step of ``target``."""
    for pairs in range(least, most + 1):
        if resolution(noise, pairs) <= target:
            return pairs
    return most


def ratio(readings: list[PairReading], metric: PairMetric, noise: Noise) -> Ratio:
    groups = _groups(log_ratios(readings, metric))
    mean = statistics.fmean(statistics.fmean(logs) for logs in groups)
    # The mean of the groups' means has the variance sd^2 / n_group summed over the groups, over
    # their number squared: sd^2 / pairs split evenly, more when not (5 pairs split 3 + 2 are worth 4.8).
    half = _half_width(noise, len(groups) ** 2 / sum(1 / len(logs) for logs in groups))
    lower = statistics.fmean(value(r["lower"], metric) for r in readings)
    # The difference: the ratio applied to the lower side's mean level, as its interval is.
    return {
        "ratio": round(math.exp(mean), 4),
        "interval": (round(math.exp(mean - half), 4), round(math.exp(mean + half), 4)),
        "difference": round(lower * (math.exp(mean) - 1), 4),
        "difference_interval": (
            round(lower * (math.exp(mean - half) - 1), 4),
            round(lower * (math.exp(mean + half) - 1), 4),
        ),
        "resolution": round(math.exp(half) - 1, 4),
        "pairs": len(readings),
    }


def stage_moves(readings: list[PairReading], noise: Noise) -> list[tuple[str, float, tuple[float, float]]]:
    """Per stage, its own CPU per request upper - lower, with a 95% interval over the pairs
    (its own spread; the pooled t when a stage was seen in one pair only), largest first."""
    names = sorted({name for r in readings for name in (*r["lower"]["stages"], *r["upper"]["stages"])})
    moves = []
    for name in names:
        deltas = [r["upper"]["stages"].get(name, 0.0) - r["lower"]["stages"].get(name, 0.0) for r in readings]
        mean = statistics.fmean(deltas)
        if len(deltas) >= 2:
            half = t95(len(deltas) - 1) * statistics.stdev(deltas) / math.sqrt(len(deltas))
        else:
            base = abs(readings[0]["lower"]["stages"].get(name, 0.0)) or abs(mean)
            half = _half_width(noise, 1) * base
        moves.append((name, round(mean, 4), (round(mean - half, 4), round(mean + half, 4))))
    return sorted(moves, key=lambda move: -abs(move[1]))
