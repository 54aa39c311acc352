"""The version sweep's pairs: each version against the first until ±3% is resolved, pairs reused from the store."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import jsonschema
import orjson
import pytest

from litellm_perfkit._bench import _pair_stats, _releases, _sweep_pairs
from litellm_perfkit._bench._options import BenchOptions
from litellm_perfkit._bench._pairs import PairReading, SideReading, measure_pair
from tests.support.documents import DOCS
from tests.support.fake_releases import release_wheels

pytestmark = pytest.mark.quiet


def _side(cpu: float) -> SideReading:
    return {"cpu_ms": cpu, "rps": 1000 / cpu, "requests": 400, "served": 480, "stages": {}, "fast_paths": {}}


def fake(levels: dict[str, float], noise: float, calls: list[tuple[str, str]]) -> _sweep_pairs.Measure:
    rng = random.Random(3)

    def measure(lower: str, upper: str, number: int) -> PairReading:
        calls.append((lower, upper))
        return {
            "first": "lower" if number % 2 == 0 else "upper",
            "lower": _side(levels[lower] * (1 + rng.gauss(0, noise))),
            "upper": _side(levels[upper] * (1 + rng.gauss(0, noise))),
            "cpu_log_ratio": None,
        }

    return measure


def test_each_version_gets_a_ratio_within_three_percent_and_pairs_are_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sweep_pairs, "CACHE", tmp_path)
    calls: list[tuple[str, str]] = []
    measure = fake({"1.83.14": 10.0, "1.103.0": 14.7}, 0.02, calls)
    options = BenchOptions(log=open("/dev/null", "w"))  # noqa: SIM115
    (measured,) = _sweep_pairs.sweep_pairs(options, ("1.83.14", "1.103.0"), measure=measure)
    assert (measured["baseline"], measured["version"]) == ("1.83.14", "1.103.0")
    assert measured["resolution"] <= 0.03 and measured["interval"][0] < 1.47 < measured["interval"][1]
    assert len(measured["cpu_ms"]) == len(calls) and all(b > a for a, b in measured["cpu_ms"])
    assert "1.103.0 / 1.83.14: 1.4" in _sweep_pairs.render_sweep_pairs([measured])
    schema = orjson.loads((DOCS / "bench.json").read_bytes())
    jsonschema.validate(
        [measured], {"type": "array", "items": schema["$defs"]["BenchSweepPairs"], "$defs": schema["$defs"]}
    )
    assert schema["$defs"]["BenchResult"]["properties"]["sweep_pairs"]["items"] == {"$ref": "#/$defs/BenchSweepPairs"}
    first = len(calls)
    again = _sweep_pairs.sweep_pairs(options, ("1.83.14", "1.103.0"), measure=measure)
    assert len(calls) == first and again == [measured]  # every pair reused from the store


def test_a_quiet_comparison_still_takes_three_pairs_of_each_order_and_a_noisy_one_stops_at_twelve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sweep_pairs, "CACHE", tmp_path)
    options = BenchOptions(log=open("/dev/null", "w"))  # noqa: SIM115
    for noise, (name, pairs) in ((0.001, ("quiet", 6)), (0.2, ("noisy", 12))):
        calls: list[tuple[str, str]] = []
        measure = fake({"1.0.0": 10.0, name: 10.0}, noise, calls)
        (measured,) = _sweep_pairs.sweep_pairs(options, ("1.0.0", name), measure=measure)
        assert len(calls) == len(measured["cpu_ms"]) == pairs, (name, measured)


# -- the estimator against a known cost, on real pairs of a small gateway ------
HASHED = {"check_key": 4_000_000, "pick_route": 1_000_000}
"""The releases' work: 5 MB hashed per request (as tests/bench/test_bisect.py's)."""
ADDED = 550_000
"""Bytes 1.0.1 hashes more per request on average, in flush_log: about 6% of the CPU per request."""
LUMP = 200
"""flush_log's lumps: every 200 requests at once, further apart than two rounds of the pairs below
(16 rounds of 18-46 requests a side on the project's machine), so they land in fewer than half the
rounds, as LiteLLM's full collections (0.3-0.4 s, a few every 15 s) do in a pair's 0.5 s rounds."""
WARMUP = 100


def _median_ratio(readings: list[PairReading]) -> tuple[float, float, float]:
    """The median-of-rounds estimator the pairs replaced: its geometric mean and 95% interval over the pairs."""
    logs = [float(r["cpu_log_ratio"] or 0.0) for r in readings]
    mean = statistics.fmean(logs)
    half = _pair_stats.t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


@pytest.mark.integration
@pytest.mark.parametrize("lump", [1, LUMP], ids=["steady", "lumps"])
def test_the_ratio_recovers_a_known_cost_steady_or_in_lumps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lump: int
) -> None:
    """1.0.1 adds about 6% of CPU per request in flush_log, either in every request or in
    lumps of 200 requests' worth. The printed ratio (each pair's totals) holds the truth
    both ways. The median of a pair's rounds holds it only when the cost is steady:
    lumps in fewer than half the rounds are what it leaves out."""
    from tests.bench.test_bisect import hashing_ms_per_byte

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, {"1.0.0": HASHED, "1.0.1": {**HASHED, "flush_log": ADDED}}, lump_every=lump)
    monkeypatch.setattr(_releases, "CACHE", tmp_path / "cache")
    options = BenchOptions(
        proxy_command="{python} -m fakegw --port {port} --upstream {upstream}",
        concurrency=2,
        duration_s=8.0,
        warmup_s=0.0,
        warmup_requests=WARMUP,
        idle_s=0.0,
        prompt_repeats=5,
        ttft_ms=2.0,
        itl_ms=0.0,
        chunks=3,
        log=open("/dev/null", "w"),  # noqa: SIM115
    )
    pip_args = ["--no-index", "--find-links", str(wheels)]
    readings = [
        measure_pair(options, "fakegw", ("1.0.0", "1.0.1"), pip_args, "lower" if n % 2 == 0 else "upper")
        for n in range(4)
    ]
    measured = _pair_stats.ratio(readings, "cpu", _pair_stats.pooled_noise([_pair_stats.log_ratios(readings, "cpu")]))
    # The truth: the bytes flush_log hashed during each pair's bursts (its lumps counted from the
    # process's first request, the warm-up's included), at what hashing costs now, per request.
    added_ms = []
    for reading in readings:
        served, requests = reading["upper"]["served"], reading["upper"]["requests"]
        lumps = served // lump - (served - requests) // lump
        added_ms.append(lumps * lump * ADDED * hashing_ms_per_byte() / requests)
    truth = 1 + statistics.fmean(added_ms) / statistics.fmean(r["lower"]["cpu_ms"] for r in readings)
    median, median_low, median_high = _median_ratio(readings)
    low, high = measured["interval"]
    print(  # the figures docs/bench.md quotes (pytest -s)
        f"\n{'steady' if lump == 1 else f'lumps of {lump}'}: truth {truth:.3f}, totals {measured['ratio']:.3f} "
        f"[{low:.3f}, {high:.3f}], median of rounds {median:.3f} [{median_low:.3f}, {median_high:.3f}], "
        f"pairs' requests a side {[r['upper']['requests'] for r in readings]}"
    )
    # Hashing costs a little more CPU under contention than alone: 1% of slack on the truth.
    assert low - 0.01 <= truth <= high + 0.01, (truth, measured, median)
    if lump == 1:  # steady: the median of rounds reads the truth too
        assert abs(median - truth) <= 0.02, (truth, median, median_low, median_high)
    else:  # in lumps: it misses most of them (each pair's count of lumps moves the truth a little)
        assert truth > 1.03 and median - 1 < (truth - 1) / 2, (truth, median, median_low, median_high)
