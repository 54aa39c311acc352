"""What per-stage profiling costs per request: off, off again after use, and on.

The same trivial Starlette app with PerfkitMiddleware and 4 stages as
``middleware_overhead`` (JSON and a 20-chunk stream), driven through ASGI in
one process; export is off so only the profiler differs. "off again" is a
profiler that was started and stopped: nothing of it may remain, costing
exactly "off". Variants interleave, ``--repeats`` times; medians.

    python -m benchmarks.stage_profile_overhead [--requests 3000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import litellm_perfkit
from litellm_perfkit import PerfkitMiddleware
from litellm_perfkit.profiling import StageProfiler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.middleware_overhead import drive, make_app  # noqa: E402

VARIANTS = ("off", "off again", "on 5 ms", "on 1 ms")  # 5 ms: the default on a perf_event timer


TIMERS: set[str] = set()  # what timed the samples (StageProfiler.timer)


def run(variant: str, path: str, n: int) -> tuple[float, int]:
    """(process CPU us per request, samples taken)."""
    app = PerfkitMiddleware(make_app())
    profiler = None
    if variant == "off again":
        used = StageProfiler()
        used.start()
        used.stop()  # nothing of it may remain
    if variant.startswith("on"):
        profiler = StageProfiler(interval_s=float(variant.split()[1]) / 1000)
    asyncio.run(drive(app, path, 200))  # warm-up
    if profiler is not None:
        profiler.start()
    before = time.process_time()
    asyncio.run(drive(app, path, n))
    cpu = (time.process_time() - before) / n * 1e6
    samples = 0
    if profiler is not None:
        profiler.stop()
        samples = sum(profiler.counts().values())
        TIMERS.add(profiler.timer)
    return cpu, samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    litellm_perfkit.configure(exporter="none")
    results: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for workload, path, n in (("json", "/json", args.requests), ("sse-20", "/stream", args.requests // 2)):
        for repeat in range(args.repeats):
            order = VARIANTS[repeat % len(VARIANTS) :] + VARIANTS[: repeat % len(VARIANTS)]
            for variant in order:
                result = run(variant, path, n)
                results.setdefault((workload, variant), []).append(result)
                print(
                    f"{workload} {variant} repeat {repeat + 1}: {result[0]:.1f} us, {result[1]} samples",
                    file=sys.stderr,
                )
    litellm_perfkit.shutdown()
    print(
        f"\nrequests per run: {args.requests} (json), {args.requests // 2} (sse-20); repeats: {args.repeats}; medians"
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; CPU = process CPU time per request")
    print(f"samples timed by: {', '.join(sorted(TIMERS))}\n")
    print(
        "| workload | per-stage profiling | CPU us / request | added vs off | ratio to off | samples per 1000 requests |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for workload in ("json", "sse-20"):
        n = args.requests if workload == "json" else args.requests // 2
        off = statistics.median(r[0] for r in results[(workload, "off")])
        for variant in VARIANTS:
            cpu = statistics.median(r[0] for r in results[(workload, variant)])
            samples = statistics.median(r[1] for r in results[(workload, variant)]) / n * 1000
            print(f"| {workload} | {variant} | {cpu:.1f} | {cpu - off:+.1f} | {cpu / off:.3f} | {samples:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
