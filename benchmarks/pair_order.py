"""Which order moves a pair's ratio: pairs of two releases measured as the
version sweep and bisect measure them (``_pairs.measure_pair``: both proxies
up together, pinned to one CPU, bursts sent to both at once), with the order
of the two sides varied one way per scheme:

- ``start``: the product's pairs. The side started first (and warmed first)
  is also the side whose users start first in every round; it alternates
  from pair to pair.
- ``send``: the lower release always started first; the side whose users
  start first in every round alternates from pair to pair.
- ``rounds``: the side started first alternates from pair to pair; the side
  whose users start first alternates from round to round (AB, BA, ...).

The schemes take turns pair by pair, so the machine's drift falls on all.
Each pair's ratio is upper / lower CPU per non-streaming request, its
sides' totals over the bursts (``_pair_stats.log_ratio``).

    python -m benchmarks.pair_order --pairs 8
    python -m benchmarks.pair_order --fakegw --pairs 2 --duration 1

``--fakegw``: the two identical releases of ``benchmarks.fakegw_pair_noise``
instead of LiteLLM (no LiteLLM venv needed).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.fakegw_pair_noise import fakegw_releases  # noqa: E402
from litellm_perfkit._bench._options import BenchOptions  # noqa: E402
from litellm_perfkit._bench._pair_stats import log_ratio  # noqa: E402
from litellm_perfkit._bench._pairs import Sides, measure_pair  # noqa: E402
from litellm_perfkit._bench._sweep_pairs import pair_options  # noqa: E402

Scheme = Literal["start", "send", "rounds"]
SCHEMES: tuple[Scheme, ...] = ("start", "send", "rounds")
# Which order a scheme varies, by which its pairs are grouped.
VARIED: dict[Scheme, str] = {"start": "started and sent first", "send": "sent first", "rounds": "started first"}


@contextlib.contextmanager
def _releases(args: argparse.Namespace) -> Iterator[tuple[BenchOptions, str, tuple[str, str], list[str]]]:
    if args.fakegw:
        with fakegw_releases(args.duration, {"check_key": 100_000, "pick_route": 0, "check_quota": 0}) as (
            options,
            pip_args,
        ):
            yield options, "fakegw", ("1.0.0", "1.0.1"), pip_args
        return
    lower, upper = args.versions.split(",")
    yield pair_options(BenchOptions(log=open(os.devnull, "w"))), "litellm", (lower, upper), []  # noqa: SIM115


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=8, help="per scheme")
    parser.add_argument("--schemes", default=",".join(SCHEMES), help="of start, send, rounds")
    parser.add_argument("--versions", default="1.83.14,1.103.0", help="lower,upper LiteLLM releases")
    parser.add_argument("--fakegw", action="store_true", help="fakegw's two identical releases instead")
    parser.add_argument("--duration", type=float, default=4.0, help="fakegw's bursts, as perfkit bisect --duration")
    args = parser.parse_args()
    schemes: list[Scheme] = [s for s in SCHEMES if s in args.schemes.split(",")]
    groups: dict[tuple[Scheme, Sides], list[float]] = {}
    with _releases(args) as (options, package, versions, pip_args):
        print(f"{package} {versions[1]} / {versions[0]}: CPU per non-streaming request, {args.pairs} pairs a scheme")
        print("\n| pair | scheme | started first | sent first | lower ms | upper ms | ratio | s | load average |")
        print("|---:|---|---|---|---:|---:|---:|---:|---:|")
        for number in range(args.pairs):
            alternate: Sides = "lower" if number % 2 == 0 else "upper"
            for scheme in schemes:
                first: Sides = "lower" if scheme == "send" else alternate
                sent: Sides = alternate if scheme != "rounds" else first
                started = time.monotonic()
                reading = measure_pair(
                    options,
                    package,
                    versions,
                    pip_args,
                    first,
                    sent_first=sent,
                    send_order="alternating" if scheme == "rounds" else "fixed",
                )
                log = log_ratio(reading, "cpu")
                groups.setdefault((scheme, alternate), []).append(log)
                print(
                    f"| {number + 1} | {scheme} | {first} | {'alternating' if scheme == 'rounds' else sent} | "
                    f"{reading['lower']['cpu_ms']:.3f} | {reading['upper']['cpu_ms']:.3f} | {math.exp(log):.3f} | "
                    f"{time.monotonic() - started:.0f} | {os.getloadavg()[0]:.1f} |",
                    flush=True,
                )
    print("\n| scheme | grouped by | lower | upper | order effect | mean of the two | spread within |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for scheme in schemes:
        by = {side: groups.get((scheme, side), []) for side in ("lower", "upper")}
        means = {side: statistics.fmean(logs) for side, logs in by.items() if logs}
        spread = [x - means[side] for side, logs in by.items() for x in logs]
        freedom = len(spread) - len(means)
        within = math.sqrt(sum(d * d for d in spread) / freedom) if freedom > 0 else float("nan")
        cells = [f"{math.exp(means[side]):.3f}" if side in means else "-" for side in ("lower", "upper")]
        effect = math.exp(means["lower"] - means["upper"]) - 1 if len(means) == 2 else float("nan")
        print(
            f"| {scheme} | {VARIED[scheme]} | {cells[0]} | {cells[1]} | {effect:+.1%} | "
            f"{math.exp(statistics.fmean(means.values())):.3f} | {within:.1%} |"
        )


if __name__ == "__main__":
    main()
