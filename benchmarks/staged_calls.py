"""What one call of a function perfkit wraps costs, in a recorded request and in one passed through:
the C decorator against the Python wrappers it replaces, and the bare function.

``stage(name)`` on a function (and ``Stage._summed``, which the LiteLLM instrumentation uses for
functions called per chunk) gives, with the accelerator, a C function (csrc/staged.c) whose async
calls are C awaitables (csrc/stagedcall.c); the Python wrappers are its reference and the fallback.
Variants: ``bare``, the function; ``c``, the C decorator; ``wrapper``, the Python wrappers around the C
stage (what the accelerator ran before the C decorator; a subclass of ``Stage`` still gets them);
``python``, the pure-Python path. Each round calls every variant in turn, ``--calls`` times each inside one request's task, its steps
clocked as the middleware clocks a recorded request's (a request passed through has no timeline and
no clock); a variant's cost is the median over the rounds of its CPU per call, and its added cost
that minus the bare function's in the same round.

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
WHERE = ("recorded", "passed through")


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
        return {"bare": bare, **{v: stage._summed("s", bare) for v, stage in stages.items()}}
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


async def one_request(c: Backend, function: Callable[..., Any], is_async: bool, calls: int, recorded: bool) -> float:
    """CPU ns per call of ``function``, ``calls`` times in one request's task (a recorded one's clocked)."""
    if not recorded:
        return float(await _calls(function, is_async, calls)) / calls
    timeline = c.timeline(perf_counter_ns(), "POST", "/")
    token = TIMELINE.set(timeline)
    try:
        clocked = c.middleware._step_accounting.clock(
            _calls(function, is_async, calls), timeline.steps, asyncio.get_running_loop(), False
        )
        return float(await clocked) / calls
    finally:
        TIMELINE.reset(token)


async def measure(rounds: int, calls: int) -> dict[tuple[str, str, str], list[float]]:
    c, python = backend("c"), backend("python")
    per_call: dict[tuple[str, str, str], list[float]] = {(k, w, v): [] for k in KINDS for w in WHERE for v in VARIANTS}
    variants = {kind: functions(kind, c, python) for kind in KINDS}
    for number in range(rounds + 5):  # 5 rounds of warm-up
        for kind in KINDS:
            for where in WHERE:
                for variant, function in variants[kind].items():
                    ns = await one_request(c, function, kind.startswith("async"), calls, where == "recorded")
                    if number >= 5:
                        per_call[(kind, where, variant)].append(ns)
    return per_call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--calls", type=int, default=200, help="calls per variant per round, in one request")
    args = parser.parse_args()
    per_call = asyncio.run(measure(args.rounds, args.calls))
    print(f"ns of CPU per call, median of {args.rounds} rounds of {args.calls} calls; added: over the bare function\n")
    print(
        "| kind | request | bare | C | wrapper | pure Python | C added | wrapper added | pure Python added"
        " | wrapper / C, added |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        for where in WHERE:
            times = {v: per_call[(kind, where, v)] for v in VARIANTS}
            added = {
                v: statistics.median(x - b for x, b in zip(times[v], times["bare"], strict=True)) for v in VARIANTS[1:]
            }
            ratio = f"{added['wrapper'] / added['c']:.1f}x" if added["c"] > 0 else "n/a"
            cells = [f"{statistics.median(times[v]):.0f}" for v in VARIANTS]
            cells += [f"{added[v]:+.0f}" for v in VARIANTS[1:]] + [ratio]
            print(f"| {kind} | {where} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
