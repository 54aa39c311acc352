"""What one call of a function perfkit wraps costs in a recorded request: the C decorator against the
Python wrappers it replaces, and the bare function.

``stage(name)`` on a function (and ``Stage.summed``, which the LiteLLM instrumentation uses for
functions called per chunk) gives, with the accelerator, a C function (csrc/staged.c) whose async
calls are C awaitables (csrc/stagedcall.c); the Python wrappers are its reference and the fallback.
Variants: ``bare``, the function; ``c``, the C decorator; ``wrapper``, the Python wrappers around the C
stage (what the accelerator ran before the C decorator; a subclass of ``Stage`` still gets them);
``python``, the pure-Python path. Each round calls every variant in turn, ``--calls`` times each inside one recorded request's task,
its steps clocked as the middleware clocks them; a variant's cost is the median over the rounds of
its CPU per call, and its added cost that minus the bare function's in the same round.

    python -m benchmarks.staged_calls [--rounds 200] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from litellm_perfkit._core._backend import Backend, backend  # noqa: E402
from litellm_perfkit._core._timeline import TIMELINE  # noqa: E402

KINDS = ("async block", "sync block", "async sum", "sync sum")
VARIANTS = ("bare", "c", "wrapper", "python")


async def _async_function(value: int) -> int:
    return value


def _sync_function(value: int) -> int:
    return value


def functions(kind: str, c: Backend, python: Backend) -> dict[str, Callable[..., Any]]:
    """Each variant's function of one kind."""
    bare = _async_function if kind.startswith("async") else _sync_function
    wrapped = type("WrappedStage", (c.stage,), {"__slots__": ()})  # a subclass: the Python wrappers, the C stage
    stages = {"c": c.stage, "wrapper": wrapped, "python": python.stage}
    if kind.endswith("sum"):
        return {"bare": bare, **{v: stage.summed("s", bare) for v, stage in stages.items()}}
    return {"bare": bare, **{v: stage("s")(bare) for v, stage in stages.items()}}


async def _calls(function: Callable[..., Any], is_async: bool, calls: int) -> int:
    started = time.thread_time_ns()
    if is_async:
        for n in range(calls):
            await function(n)
    else:
        for n in range(calls):
            function(n)
    return time.thread_time_ns() - started


async def one_request(c: Backend, function: Callable[..., Any], is_async: bool, calls: int) -> float:
    """CPU ns per call of ``function``, ``calls`` times in one recorded request's clocked task."""
    timeline = c.timeline(perf_counter_ns(), "POST", "/")
    token = TIMELINE.set(timeline)
    try:
        clocked = c.middleware._step_accounting.clock(
            _calls(function, is_async, calls), timeline.steps, asyncio.get_running_loop(), False
        )
        return float(await clocked) / calls
    finally:
        TIMELINE.reset(token)


async def measure(rounds: int, calls: int) -> dict[tuple[str, str], list[float]]:
    c, python = backend("c"), backend("python")
    per_call: dict[tuple[str, str], list[float]] = {(k, v): [] for k in KINDS for v in VARIANTS}
    variants = {kind: functions(kind, c, python) for kind in KINDS}
    for number in range(rounds + 5):  # 5 rounds of warm-up
        for kind in KINDS:
            for variant, function in variants[kind].items():
                ns = await one_request(c, function, kind.startswith("async"), calls)
                if number >= 5:
                    per_call[(kind, variant)].append(ns)
    return per_call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--calls", type=int, default=200, help="calls per variant per round, in one request")
    args = parser.parse_args()
    per_call = asyncio.run(measure(args.rounds, args.calls))
    print(f"ns of CPU per call, median of {args.rounds} rounds of {args.calls} calls; added: over the bare function\n")
    print(
        "| kind | bare | C | wrapper | pure Python | C added | wrapper added | pure Python added | wrapper / C, added |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        bare = per_call[(kind, "bare")]
        added = {
            v: statistics.median(x - b for x, b in zip(per_call[(kind, v)], bare, strict=True)) for v in VARIANTS[1:]
        }
        medians = [statistics.median(per_call[(kind, v)]) for v in VARIANTS]
        ratio = added["wrapper"] / added["c"] if added["c"] > 0 else float("nan")
        cells = [f"{m:.0f}" for m in medians] + [f"+{added[v]:.0f}" for v in VARIANTS[1:]] + [f"{ratio:.1f}x"]
        print(f"| {kind} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
