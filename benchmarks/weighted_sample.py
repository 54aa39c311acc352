"""The weighted sample's error: counts and percentiles from the records the
record choice keeps, against every request (docs/telemetry.md#the-weighted-sample).

Pure simulation on a fake clock: ``RecordChoice`` (the middleware's, at
10 a second) sees Poisson arrivals with known latencies; each recorded one
carries its weight. Per scenario and seed, the weighted count's error, and
for p50 and p95 the rank error of the weighted and of the unweighted
estimate: the share of all requests at or below the estimate, minus q, in
percentage points and in standard errors sqrt(q(1-q)/n_eff), n_eff being
Kish's (sum w)^2 / sum w^2.

- ``steady``: 30 a second (3x the cap) for 60 s, latencies lognormal (median 20 ms).
- ``bursty``: 5 s at 5 a second (4-6 ms) then 1 s at 400 a second
  (40-60 ms), for 120 s: the sample keeps most quiet requests (not those of the
  second after a burst, drawn at the burst's chance).
- ``ramp``: from 5 to 100 a second over 60 s, latency growing with the rate (queueing).
- ``offsets``: two steady drivers, as a load test or a health check sends, for 60 s:
  27 a second (lognormal, median 20 ms) and 3 a second (4-6 ms) at a random
  offset from the first. A choice by arrival time alone can lock onto the offsets.

    python -m benchmarks.weighted_sample [--seeds 200]
"""

from __future__ import annotations

import argparse
import bisect
import math
import random
import statistics
import sys
from collections.abc import Callable

from litellm_perfkit._core._sampling import RecordChoice, effective_size, rank_standard_error, weighted_quantile

Arrivals = list[tuple[float, float]]  # (seconds, latency ms)


def steady(rng: random.Random) -> Arrivals:
    out, now = [], 0.0
    while now < 60:
        now += rng.expovariate(30.0)
        out.append((now, rng.lognormvariate(math.log(20), 0.5)))
    return out


def bursty(rng: random.Random) -> Arrivals:
    out, now = [], 0.0
    while now < 120:
        busy = now % 6 >= 5
        now += rng.expovariate(400.0 if busy else 5.0)
        out.append((now, rng.uniform(40, 60) if busy else rng.uniform(4, 6)))
    return out


def ramp(rng: random.Random) -> Arrivals:
    out, now = [], 0.0
    while now < 60:
        rate = 5 + 95 * now / 60
        now += rng.expovariate(rate)
        out.append((now, rng.lognormvariate(math.log(5 + rate / 2), 0.3)))
    return out


def offsets(rng: random.Random) -> Arrivals:
    offset = rng.random() / 3
    often = [(n / 27, rng.lognormvariate(math.log(20), 0.5)) for n in range(60 * 27)]
    seldom = [(offset + n / 3, rng.uniform(4, 6)) for n in range(60 * 3)]
    return sorted(often + seldom)


SCENARIOS: dict[str, Callable[[random.Random], Arrivals]] = {
    "steady": steady,
    "bursty": bursty,
    "ramp": ramp,
    "offsets": offsets,
}


def recorded(arrivals: Arrivals, rng: random.Random) -> list[tuple[float, int]]:
    """(latency, weight) of each request the record choice keeps."""
    now = [0]
    choice = RecordChoice(1.0, 10.0, lambda: now[0], rng.random)
    sample = []
    for at, latency in arrivals:
        now[0] = 10**9 + int(at * 1e9)
        weight = choice.record()
        if weight:
            sample.append((latency, weight))
    return sample


def rank(ordered: list[float], value: float) -> float:
    """The share of ``ordered`` at or below ``value``."""
    return bisect.bisect_right(ordered, value) / len(ordered)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args()
    print(f"\nRecordChoice(ratio 1, rate 10/s), {args.seeds} seeds per scenario; python {sys.version.split()[0]}\n")
    print(
        "| scenario | requests | recorded | count error % (max abs) | q | weighted rank error, points (mean; 95% of seeds within) "
        "| in SE (mean) | within 2 SE | unweighted rank error, points (mean) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, scenario in SCENARIOS.items():
        sizes, kept, counts = [], [], []
        errors: dict[float, list[tuple[float, float, float]]] = {0.5: [], 0.95: []}
        for seed in range(args.seeds):
            rng = random.Random(seed)
            arrivals = scenario(rng)
            sample = recorded(arrivals, rng)
            latencies = sorted(latency for _, latency in arrivals)
            sizes.append(len(arrivals))
            kept.append(len(sample))
            counts.append(abs(sum(w for _, w in sample) - len(arrivals)) / len(arrivals) * 100)
            n_eff = effective_size(sample)
            for q, found in errors.items():
                weighted = rank(latencies, weighted_quantile(sample, q)) - q
                unweighted = rank(latencies, weighted_quantile([(v, 1) for v, _ in sample], q)) - q
                found.append((weighted, weighted / rank_standard_error(q, n_eff), unweighted))
        for q, found in errors.items():
            weighted = [w for w, _, _ in found]
            spread = sorted(abs(w) for w in weighted)[int(0.95 * len(weighted)) - 1]
            print(
                f"| {name} | {statistics.median(sizes):.0f} | {statistics.median(kept):.0f} | {max(counts):.2f} | p{q * 100:g} "
                f"| {statistics.fmean(weighted) * 100:+.1f}; {spread * 100:.1f} | {statistics.fmean(z for _, z, _ in found):+.2f} "
                f"| {sum(abs(z) <= 2 for _, z, _ in found) / len(found) * 100:.0f}% "
                f"| {statistics.fmean(u for _, _, u in found) * 100:+.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
