"""``litellm_recording_cost --measure instructions``: the passed-through and
the recorded proxy each under valgrind's callgrind, and where the
instructions and the Python objects recording adds go (that module's
docstring has the method). Only the outer process imports this: the proxy's
own runs that file without the benchmarks' dependencies."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.allocations import allocations_by_callers, calls_by_function
from benchmarks.allocations import counts as allocations

__all__ = ["StartServer", "count_instructions", "python_version", "runs_spread"]

StartServer = Callable[[dict[str, str], str, tuple[str, ...]], tuple["subprocess.Popen[str]", Any]]
"""(environment, mode, the command's prefix) -> (the proxy's process, the pipe it answers each batch on)."""


_OWN_GROUPS = (
    ("CPython's bytecode loop (Python code)", ("Python/ceval.c:_PyEval_EvalFrameDefault",)),
    ("allocation and freeing", ("Objects/obmalloc.c:", "malloc.c:", "Modules/gcmodule.c:_PyObject_GC_")),
    ("the cyclic collector", ("Modules/gcmodule.c:", "traverse")),
)


def _functions(out_file: Path) -> dict[str, int]:
    """Each function's own instructions in a callgrind output (file:function, CPython's build path cut)."""
    report = subprocess.run(
        ["callgrind_annotate", "--show=Ir", "--threshold=100", "--auto=no", str(out_file)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: dict[str, int] = {}
    for line in report.splitlines():
        match = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*?)(?: \[.*\])?$", line)
        if match and "PROGRAM TOTALS" not in line:
            name = re.sub(r"^.*?/Python-[\d.]+/", "", match.group(2))
            name = re.sub(r"^(?:.*/)?litellm_perfkit/_core/csrc/", "perfkit csrc/", name)  # absolute or not, as built
            counts[name] = counts.get(name, 0) + int(match.group(1).replace(",", ""))
    return counts


def _event_totals(out_file: Path) -> dict[str, int]:
    """Each event's count over the whole measured window (callgrind's own totals line)."""
    events: list[str] = []
    for line in out_file.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("totals:"):
            return dict(zip(events, map(int, line.split()[1:])))
    raise RuntimeError(f"no totals in {out_file}")


# callgrind's cache events (--cache-sim yes): level 1 and last level, instructions and data.
_CACHE_EVENTS = {
    "I1mr": "level-1 instruction cache misses",
    "D1mr": "level-1 data cache read misses",
    "D1mw": "level-1 data cache write misses",
    "ILmr": "last-level cache misses, instructions",
    "DLmr": "last-level cache read misses, data",
    "DLmw": "last-level cache write misses, data",
}


def _group(function: str) -> str:
    if function.startswith("perfkit csrc/"):
        return "perfkit's C: " + function.split("/", 1)[1].split(":")[0]
    for group, marks in _OWN_GROUPS:
        if any(mark in function for mark in marks):
            return group
    return ""


def count_instructions(
    args: argparse.Namespace, python: Path, env: dict[str, str], workload: str, start: StartServer
) -> dict[str, float]:
    """Passed through and recorded, each under callgrind for the measured batches only; their difference by where
    it goes. Returns what recording adds per request: instructions, objects and gc-tracked objects."""
    requests = args.rounds * args.batch
    workdir = Path(env["PERFKIT_BENCH_WORKDIR"])
    counted_env = {**env, "PYTHONHASHSEED": "0"}
    outs = {mode: workdir / f"callgrind.{workload}.{mode}" for mode in ("passed", "recorded")}
    processes = {
        mode: start(
            counted_env,
            mode,
            # every core (the outer process keeps to the mock's), no address randomization
            ("taskset", "-c", f"0-{(os.cpu_count() or 1) - 1}", "setarch", "-R", "valgrind", "--tool=callgrind")
            + ("--instr-atstart=no", f"--cache-sim={args.cache_sim}", "--compress-strings=no")
            + ((f"--separate-callers={args.allocation_callers}",) if args.allocation_callers else ())
            + (f"--callgrind-out-file={out}",),
        )
        for mode, out in outs.items()
    }

    def batches(mode: str, count: int) -> None:
        child, results = processes[mode]
        assert child.stdin is not None
        for _ in range(count):
            child.stdin.write("batch\n")
            child.stdin.flush()
            results.readline()

    def measured(mode: str) -> None:
        pid = str(processes[mode][0].pid)
        batches(mode, args.warmup)
        subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
        batches(mode, args.rounds)
        subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)

    try:
        with ThreadPoolExecutor(2) as pool:  # deterministic counts: side by side they do not disturb each other
            for done in [pool.submit(measured, mode) for mode in processes]:
                done.result()
    finally:
        for child, _results in processes.values():
            if child.stdin is not None:
                child.stdin.close()
            child.wait(timeout=600)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for out in outs.values():
            shutil.copy(out, args.keep / out.name)
    counts = {mode: _functions(out) for mode, out in outs.items()}
    total = {mode: sum(functions.values()) / requests for mode, functions in counts.items()}
    added = {
        name: (counts["recorded"].get(name, 0) - counts["passed"].get(name, 0)) / requests
        for name in counts["recorded"].keys() | counts["passed"].keys()
    }
    print(
        f"\n{workload}: instructions per request (callgrind, {requests} requests each, python {python_version(python)}): "
        f"passed through {total['passed']:,.0f}, recorded {total['recorded']:,.0f}, "
        f"recording adds {total['recorded'] - total['passed']:+,.0f}\n"
    )
    grouped: dict[str, float] = {}
    for name, difference in added.items():
        grouped[_group(name)] = grouped.get(_group(name), 0.0) + difference
    rest = grouped.pop("")
    largest = sorted(((d, n) for n, d in added.items() if not _group(n)), reverse=True)[:8]
    print("| where | instructions added per request |")
    print("|---|---:|")
    for name, difference in sorted(grouped.items(), key=lambda item: -abs(item[1])):
        print(f"| {name} | {difference:+,.0f} |")
    print(f"| every other function | {rest:+,.0f} |")
    for difference, name in largest:
        print(f"| - of which {name} | {difference:+,.0f} |")
    allocated = {mode: allocations(calls_by_function(out)) for mode, out in outs.items()}
    passed, recorded = (allocated[mode] for mode in ("passed", "recorded"))
    added_per_request = {"instructions": total["recorded"] - total["passed"]}
    print("\n| Python allocations per request | passed through | recorded | added |")
    print("|---|---:|---:|---:|")
    for what, field in (("objects (small-object allocator calls)", "objects"), ("of which gc-tracked", "gc_tracked")):
        before, after = getattr(passed, field) / requests, getattr(recorded, field) / requests
        added_per_request[field] = after - before
        print(f"| {what} | {before:,.1f} | {after:,.1f} | {after - before:+,.1f} |")
    if args.allocation_callers:
        chains = {mode: allocations_by_callers(out) for mode, out in outs.items()}
        added_by_chain = {
            chain: (chains["recorded"][chain] - chains["passed"][chain]) / requests
            for chain in chains["recorded"].keys() | chains["passed"].keys()
        }
        print("\n| objects added per request | allocated by (callee < caller < ...) |")
        print("|---:|---|")
        for chain, difference in sorted(added_by_chain.items(), key=lambda item: -abs(item[1]))[:30]:
            print(f"| {difference:+.1f} | {chain.replace(chr(39), ' < ')} |")
    if args.cache_sim == "yes":
        events = {mode: _event_totals(out) for mode, out in outs.items()}
        print("\n| simulated cache event | passed through, per request | recorded | added |")
        print("|---|---:|---:|---:|")
        for event, meaning in _CACHE_EVENTS.items():
            passed, recorded = events["passed"][event] / requests, events["recorded"][event] / requests
            print(
                f"| {meaning} ({event}) | {passed:,.0f} | {recorded:,.0f} | {recorded - passed:+,.0f} ({(recorded / passed - 1) * 100:+.1f}%) |"
            )
    return added_per_request


def runs_spread(workload: str, runs: list[dict[str, float]]) -> None:
    """What recording added in each run of the pair of processes, and the range: one commit's runs differ
    (LiteLLM's timers, where collections fall), so compare ranges, not single runs."""
    print(f"\n{workload}: recording adds per request, {len(runs)} runs (each a fresh pair of processes)\n")
    print("| | " + " | ".join(f"run {n + 1}" for n in range(len(runs))) + " | range |")
    print("|---|" + "---:|" * (len(runs) + 1))
    for field, label in (
        ("instructions", "instructions"),
        ("objects", "objects"),
        ("gc_tracked", "of which gc-tracked"),
    ):
        values = [run[field] for run in runs]
        digits = 0 if field == "instructions" else 1
        cells = " | ".join(f"{v:+,.{digits}f}" for v in values)
        print(f"| {label} | {cells} | {min(values):+,.{digits}f} to {max(values):+,.{digits}f} |")


def python_version(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    ).stdout.strip()
