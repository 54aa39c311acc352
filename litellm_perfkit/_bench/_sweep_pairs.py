"""A version sweep's CPU per request, compared in pairs: each version against
the first, both proxies up together (``_pairs``), until the ratio's interval
is within the resolution asked or the pairs run out. Pairs of the same two
versions and load measured before (by a sweep or a bisect) are reused."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..types import BenchSweepPairs
from ._bisect_bench import BISECT_BENCH
from ._bisect_journal import pair_key
from ._options import BenchOptions
from ._pair_stats import Ratio, log_ratios, pairs_for, pooled_noise, ratio
from ._pair_store import STORE_NAME, PairStore, pair_settings
from ._pairs import PairReading, Sides, measure_pair
from ._venvs import CACHE

__all__ = ["Measure", "SWEEP_RESOLUTION", "pair_options", "render_sweep_pairs", "sweep_pairs"]

Measure = Callable[[str, str, int], PairReading]
"""One pair of (baseline, version), the number of pairs measured so far."""

SWEEP_RESOLUTION = 0.03
# Three of each order at least: the noise then has 4 degrees of freedom before a narrow interval
# can end the comparison (with 2 of each, its 2 let one quiet pair's spread stop it at ±0.5%).
MIN_SWEEP_PAIRS = 6
MAX_SWEEP_PAIRS = 12


def pair_options(options: BenchOptions) -> BenchOptions:
    """The pairs' load: perfkit bisect's (so its pairs and the sweep's are each other's), the sweep's mock and config."""
    return dataclasses.replace(
        BISECT_BENCH,
        config=options.config,
        provider=options.provider,
        ttft_ms=options.ttft_ms,
        itl_ms=options.itl_ms,
        chunks=options.chunks,
        prompt_repeats=options.prompt_repeats,
        log=options.log,
        progress=options.progress,
    )


def sweep_pairs(
    options: BenchOptions,
    versions: tuple[str, ...],
    target: float = SWEEP_RESOLUTION,
    most: int = MAX_SWEEP_PAIRS,
    measure: Measure | None = None,
) -> list[BenchSweepPairs]:
    """Each version after the first against it: the CPU-per-request ratio, and the pairs."""
    paired = pair_options(options)
    store = PairStore(CACHE / STORE_NAME, pair_settings(paired, "litellm", []))

    def measured(lower: str, upper: str, number: int) -> PairReading:
        first: Sides = "lower" if number % 2 == 0 else "upper"
        return measure_pair(paired, "litellm", (lower, upper), [], first)

    take = measure or measured
    known = {key: log_ratios(readings, "cpu") for key, readings in store.known().items()}
    results = []
    baseline = versions[0]
    for version in versions[1:]:
        readings = store.pairs(baseline, version)
        if readings:
            options.say(f"reusing {len(readings)} pair(s) of {baseline} and {version} measured earlier")
        while True:
            others = [
                logs
                for key, logs in known.items()
                if key not in (pair_key(baseline, version), pair_key(version, baseline))
            ]
            noise = pooled_noise([*others, log_ratios(readings, "cpu")])
            wanted = pairs_for(target, noise, min(MIN_SWEEP_PAIRS, most), most)
            if len(readings) >= wanted and (
                len(readings) >= most or ratio(readings, "cpu", noise)["resolution"] <= target
            ):
                break
            options.say(f"CPU per request in pairs: {baseline} against {version}, pair {len(readings) + 1} of {wanted}")
            reading = take(baseline, version, len(readings))
            store.add(baseline, version, reading)
            readings.append(reading)
        results.append(_record(baseline, version, ratio(readings, "cpu", noise), readings))
    return results


def _record(baseline: str, version: str, measured: Ratio, readings: list[PairReading]) -> BenchSweepPairs:
    return {
        "baseline": baseline,
        "version": version,
        "ratio": measured["ratio"],
        "interval": list(measured["interval"]),
        "difference_ms": measured["difference"],
        "difference_interval_ms": list(measured["difference_interval"]),
        "resolution": measured["resolution"],
        "cpu_ms": [[r["lower"]["cpu_ms"], r["upper"]["cpu_ms"]] for r in readings],
    }


def render_sweep_pairs(results: list[BenchSweepPairs]) -> str:
    lines = ["CPU per non-streaming request, in pairs (both proxies up together, bursts sent to both at once):"]
    for compared in results:
        low, high = compared["interval"]
        lines.append(
            f"  {compared['version']} / {compared['baseline']}: {compared['ratio']:.3f} [{low:.3f}, {high:.3f}] 95%, "
            f"{compared['difference_ms']:+.3f} ms per request, {len(compared['cpu_ms'])} pairs "
            f"(resolves {compared['resolution']:.1%})"
        )
    return "\n".join(lines)
