"""The pairs' ratio and its interval: the order each pair took (which side started first) is
the period of a crossover trial, so an order effect of either sign moves neither."""

from __future__ import annotations

import math

import pytest

from litellm_perfkit._bench import _pair_stats
from litellm_perfkit._bench._pairs import PairReading, SideReading, Sides

NOISE = (0.01, 0.02, -0.02, -0.01)
"""Each order's pairs: these log ratios around the truth."""
TRUTH = math.log(1.5)


def _side(cpu_ms: float) -> SideReading:
    return {"cpu_ms": cpu_ms, "rps": 100.0, "requests": 100, "served": 100, "stages": {}, "fast_paths": {}}


def _pair(first: Sides, log: float) -> PairReading:
    return {"first": first, "lower": _side(10.0), "upper": _side(10.0 * math.exp(log)), "cpu_log_ratio": None}


def _pairs(effect: float, orders: tuple[Sides, ...] = ("lower", "upper")) -> list[PairReading]:
    """Pairs taking turns at the orders; those started lower first read ``effect`` higher, the others lower."""
    return [
        _pair(first, TRUTH + noise + (effect if first == "lower" else -effect)) for noise in NOISE for first in orders
    ]


def _measured(readings: list[PairReading]) -> _pair_stats.Ratio:
    return _pair_stats.ratio(readings, "cpu", _pair_stats.pooled_noise([_pair_stats.log_ratios(readings, "cpu")]))


@pytest.mark.parametrize("effect", [0.035, -0.07])
def test_an_order_effect_of_either_sign_moves_neither_the_ratio_nor_its_interval(effect: float) -> None:
    without, alternating = _measured(_pairs(0.0)), _measured(_pairs(effect))
    assert alternating == without
    assert alternating["ratio"] == pytest.approx(1.5, rel=1e-3) and alternating["pairs"] == 8


def test_the_noise_is_the_spread_within_each_order() -> None:
    mean = sum(NOISE) / len(NOISE)
    within = math.sqrt(2 * sum((x - mean) ** 2 for x in NOISE) / 6)
    noise = _pair_stats.pooled_noise([_pair_stats.log_ratios(_pairs(0.05), "cpu")])
    assert noise == {"sd": pytest.approx(within), "freedom": 6}
    half = _pair_stats.t95(6) * within / math.sqrt(8)
    assert _measured(_pairs(0.05))["resolution"] == pytest.approx(math.exp(half) - 1, abs=1e-4)


def test_pairs_of_one_order_are_their_plain_mean() -> None:
    readings = _pairs(0.05, orders=("upper",))
    logs = [TRUTH + noise - 0.05 for noise in NOISE]
    measured = _measured(readings)
    assert measured["ratio"] == pytest.approx(math.exp(sum(logs) / 4), rel=1e-4)
    assert _pair_stats.pooled_noise([_pair_stats.log_ratios(readings, "cpu")])["freedom"] == 3


def test_an_uneven_split_between_the_orders_is_worth_fewer_pairs() -> None:
    """Five pairs, three in one order: each order's mean weighs alike, worth 4.8 even pairs."""
    logs: dict[Sides, tuple[float, ...]] = {"lower": (0.01, -0.01, 0.0), "upper": (0.01, -0.01)}
    readings = [
        _pair(first, TRUTH + log + (0.03 if first == "lower" else 0.0)) for first in logs for log in logs[first]
    ]
    noise: _pair_stats.Noise = {"sd": 0.02, "freedom": 10}
    measured = _pair_stats.ratio(readings, "cpu", noise)
    assert measured["ratio"] == pytest.approx(1.5 * math.exp(0.015), rel=1e-4)
    half = _pair_stats.t95(10) * 0.02 / math.sqrt(4 / (1 / 3 + 1 / 2))
    assert measured["resolution"] == pytest.approx(math.exp(half) - 1, abs=1e-4)


def test_until_each_order_has_two_pairs_the_pairs_are_one_group() -> None:
    """A bisect's comparison of three pairs: the plain mean, the order effect left in the noise."""
    logs = [TRUTH + 0.03, TRUTH + 0.01, TRUTH - 0.03]
    readings = [_pair("lower", logs[0]), _pair("lower", logs[1]), _pair("upper", logs[2])]
    noise = _pair_stats.pooled_noise([_pair_stats.log_ratios(readings, "cpu")])
    mean = sum(logs) / 3
    assert noise == {"sd": pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)), "freedom": 2}
    assert _pair_stats.ratio(readings, "cpu", noise)["ratio"] == pytest.approx(math.exp(mean), rel=1e-4)
