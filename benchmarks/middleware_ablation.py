"""Where PerfkitMiddleware's time per request goes: turn one part off at a time.

The app and driver are benchmarks/middleware_overhead.py's (ASGI called
directly, no sockets), with no exporter (the request path alone), pinned to
core 0. Each variant removes one part; its saving is the median over rounds
of the variant's batch against perfkit's batch of the same round (batches
of every variant interleaved, main-thread CPU; see middleware_overhead).

- ``no headers``: ``server_timing="off", overhead_header="off"``
- ``no stages``: the app's four ``stage()`` blocks removed (bare still runs
  them, as no-ops outside a request)
- ``raw receive``: the app gets the server's ``receive`` (no disconnect
  detection)
- ``python path``: perfkit's pure-Python classes instead of the C
  accelerator (a negative saving: what the accelerator saves)

    python -m benchmarks.middleware_ablation [--workload stream|json] [--rounds 300] [--batch 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.middleware_overhead as overhead  # noqa: E402
from litellm_perfkit import PerfkitMiddleware  # noqa: E402
from litellm_perfkit._core import _sink  # noqa: E402


class _RawReceive(PerfkitMiddleware):  # type: ignore[valid-type,misc]
    """perfkit as it is, except that the app gets the server's own ``receive``."""

    _exchange_class = type(
        "_RawExchange",
        (PerfkitMiddleware._exchange_class,),
        {"__slots__": (), "receive": property(lambda exchange: exchange._receive)},
    )


def variants() -> list[overhead.Variant]:
    Variant, app = overhead.Variant, overhead.make_app
    return [
        Variant("bare", app()),
        Variant("perfkit", PerfkitMiddleware(app())),
        Variant("no headers", PerfkitMiddleware(app(), server_timing="off", overhead_header="off")),
        Variant("no stages", PerfkitMiddleware(app(stages=False))),
        Variant("raw receive", _RawReceive(app())),
        Variant("python path", overhead.PYTHON.middleware(app(overhead.PYTHON.stage))),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("stream", "json"), default="stream")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {0})
    path = "/stream" if args.workload == "stream" else "/json"
    chosen = variants()
    try:
        main_us = asyncio.run(overhead.interleave(chosen, path, args.rounds, args.batch))
    finally:
        _sink.set_sink(None)
    bare, ours = main_us["bare"], main_us["perfkit"]
    print(
        f"{args.workload}: {args.rounds} rounds x {args.batch} requests per variant, interleaved; core 0, no exporter; "
        "main-thread CPU, medians over rounds\n"
    )
    print("| variant | µs per request | added vs bare | saving vs perfkit |")
    print("|---|---:|---:|---:|")
    for name, values in main_us.items():
        added = statistics.median(a - b for a, b in zip(values, bare))
        saving = statistics.median(b - a for a, b in zip(values, ours))
        print(f"| {name} | {statistics.median(values):.1f} | {added:+.1f} | {saving:+.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
