"""The pair noise of perfkit bisect's pairs on a small gateway: two identical
releases of ``fakegw`` (tests/support/fake_releases.py), measured in pairs as
bisect measures them (both up together, pinned to one CPU, bursts sent to both
at once); the spread of one pair's log ratio (its sides' totals, as bisect's
comparisons take it) is the pair noise. The median of the pair's rounds'
ratios, which the comparisons no longer take, is shown beside it.

    python -m benchmarks.fakegw_pair_noise --pairs 6 --duration 4

Prints one row per pair and the spread; the load average beside each pair,
since the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from litellm_perfkit._bench._options import BenchOptions
from litellm_perfkit._bench._pair_stats import log_ratio
from litellm_perfkit._bench._pairs import Sides, measure_pair
from tests.support.fake_releases import release_wheels


@contextlib.contextmanager
def fakegw_releases(duration_s: float, work: dict[str, int]) -> Iterator[tuple[BenchOptions, list[str]]]:
    """Releases 1.0.0 and 1.0.1 of fakegw doing ``work`` (bytes hashed per function), installed under a
    cache of their own (not the user's); perfkit bisect's pair settings for them, and pip's arguments."""
    with tempfile.TemporaryDirectory(prefix="fakegw-pairs-") as tmp:
        os.environ["PERFKIT_CACHE_DIR"] = str(Path(tmp) / "cache")
        wheels = Path(tmp) / "wheels"
        wheels.mkdir()
        release_wheels(wheels, {"1.0.0": work, "1.0.1": work})
        yield (
            BenchOptions(
                concurrency=2,
                duration_s=duration_s,
                warmup_s=0,
                warmup_requests=100,
                idle_s=0,
                label="bisect",
                prompt_repeats=5,
                ttft_ms=2,
                itl_ms=0,
                chunks=3,
                proxy_command="{python} -m fakegw --port {port} --upstream {upstream}",
                log=open(os.devnull, "w"),  # noqa: SIM115
            ),
            ["--no-index", "--find-links", str(wheels)],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--duration", type=float, default=4.0, help="perfkit bisect --duration: bursts of 0.5 s")
    parser.add_argument("--key-bytes", type=int, default=4_000_000, help="hashed per request in check_key (auth)")
    parser.add_argument("--route-bytes", type=int, default=1_000_000, help="hashed per request in pick_route")
    args = parser.parse_args()
    work = {"check_key": args.key_bytes, "pick_route": args.route_bytes, "check_quota": 0}
    with fakegw_releases(args.duration, work) as (options, pip_args):
        print(
            f"fakegw, two identical releases hashing {sum(work.values()):,} bytes per request; --duration {args.duration:g}s"
        )
        print(
            "\n| pair | s | CPU ms per request, 1.0.0 | 1.0.1 | log ratio (totals) | median of rounds | load average |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        logs, medians = [], []
        for number in range(args.pairs):
            started = time.monotonic()
            first: Sides = "lower" if number % 2 == 0 else "upper"
            reading = measure_pair(options, "fakegw", ("1.0.0", "1.0.1"), pip_args, first)
            log, median = log_ratio(reading, "cpu"), reading["cpu_log_ratio"]
            logs.append(log)
            if median is not None:
                medians.append(median)
            print(
                f"| {number + 1} | {time.monotonic() - started:.1f} | {reading['lower']['cpu_ms']:.3f} | "
                f"{reading['upper']['cpu_ms']:.3f} | {log:+.4f} | "
                f"{'-' if median is None else f'{median:+.4f}'} | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
    print()
    for name, values in (("pair noise (spread of one pair's log ratio)", logs), ("the median of rounds'", medians)):
        spread = statistics.stdev(values) if len(values) > 1 else float("nan")
        mean = statistics.fmean(values) if values else float("nan")
        print(f"{name}: {spread:.2%} over {len(values)} pairs; mean {mean:+.2%}")


if __name__ == "__main__":
    main()
