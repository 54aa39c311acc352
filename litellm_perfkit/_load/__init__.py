"""The load driver: open/closed loop, streaming TTFT/ITL, exact merged histograms."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

from .._stop import Stopped, run_until_stopped, signal_name
from ..types import Driver, LoadConfig, LoadResult, ProgressMode
from ._locust_run import LocustError, run_locust
from ._recorder import Recorder
from ._report import SCHEMA, build_result, median_run, render_table, stopped
from ._runner import Arrival, LoadPlan, Phase, init_driver, run_phase_logged, run_phase_sync
from ._workload import Workload, WorkloadError, endpoint_url

__all__ = [
    "Arrival",
    "Driver",
    "LoadPlan",
    "LocustError",
    "Workload",
    "WorkloadError",
    "load_errors",
    "run_load",
    "render_table",
    "endpoint_url",
    "SCHEMA",
]


def _split(total: int | None, parts: int, index: int) -> int | None:
    if total is None:
        return None
    return total // parts + (1 if index < total % parts else 0)


def _plan_for(plan: LoadPlan, processes: int, index: int) -> LoadPlan:
    return dataclasses.replace(
        plan,
        concurrency=_split(plan.concurrency, processes, index) if plan.concurrency else None,
        rate=plan.rate / processes if plan.rate else None,
        requests=_split(plan.requests, processes, index),
        warmup_requests=_split(plan.warmup_requests, processes, index) or 0,
        seed=None if plan.seed is None else plan.seed + index,
    )


@contextmanager
def _progress(mode: ProgressMode, plan: LoadPlan) -> Iterator[Any]:
    """A rich progress bar on a terminal; nothing otherwise. ``auto`` goes
    without one when rich is not installed; ``on`` needs it (the cli extra)."""
    if mode == "off" or (mode == "auto" and not sys.stderr.isatty()):
        yield None
        return
    try:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    except ModuleNotFoundError:
        if mode == "on":
            raise
        yield None
        return

    total = (plan.requests + plan.warmup_requests) if plan.requests else (plan.duration_s or 0) + plan.warmup_s
    unit = "requests" if plan.requests else "s"
    with Progress(
        TextColumn("perfkit load"),
        BarColumn(),
        TextColumn(f"{{task.completed:.0f}}/{{task.total:.0f}} {unit}"),
        TimeRemainingColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task("load", total=total)
        yield (bar, task, unit)


@contextmanager
def load_errors(fail: Callable[[str], Exception]) -> Iterator[None]:
    """A load that cannot run (a bad workload, Locust missing or failing) raised as ``fail(its one-line message)``."""
    try:
        yield
    except (LocustError, WorkloadError) as exc:
        raise fail(str(exc)) from None


def run_load(
    workload: Workload,
    plan: LoadPlan,
    *,
    processes: int = 1,
    repeats: int = 1,
    progress: ProgressMode = "auto",
    jsonl_path: str | None = None,
    driver: Driver = "perfkit",
) -> LoadResult:
    """Run the load ``repeats`` times; returns the result document (median run).
    ``driver="locust"`` runs each repeat through Locust with perfkit's user."""
    config: LoadConfig = {
        "url": endpoint_url(workload.url)[3],
        "models": [list(m) for m in workload.models],
        "stream": workload.stream,
        "max_tokens": workload.max_tokens,
        "prompt_repeats": workload.prompt_repeats,
        "mode": plan.mode,
        "concurrency": plan.concurrency,
        "rate": plan.rate,
        "arrival": plan.arrival,
        "duration_s": plan.duration_s,
        "requests": plan.requests,
        "warmup_s": plan.warmup_s,
        "warmup_requests": plan.warmup_requests,
        "ramp_s": plan.ramp_s,
        "timeout_s": plan.timeout_s,
        "seed": plan.seed,
        "processes": processes,
        "repeats": repeats,
        "driver": driver,
    }
    results: list[LoadResult] = []
    for _ in range(repeats):
        if driver == "locust":
            result: LoadResult = {**run_locust(workload, plan, processes, jsonl_path), "config": config}
        elif processes == 1:
            result = _run_here(workload, plan, progress, jsonl_path, config)
        else:
            result = _run_processes(workload, plan, processes, progress, jsonl_path, config)
        results.append(result)
        if not result["complete"]:
            break  # stopped by a signal: no more repeats
    if len(results) == 1:
        return results[0]
    complete = [r for r in results if r["complete"]]
    document = median_run(complete or results)
    if len(complete) < len(results):
        document["complete"], document["stopped_by"] = False, results[-1].get("stopped_by", "SIGINT")
    return document


def _run_here(
    workload: Workload, plan: LoadPlan, progress: ProgressMode, jsonl_path: str | None, config: LoadConfig
) -> LoadResult:
    """One phase in this process. A stop signal (Ctrl-C, SIGTERM, SIGHUP) ends
    it early: the result then holds what was measured until then."""
    phases: list[Phase] = []
    with _progress(progress, plan) as bar:

        def advance(n: int) -> None:
            if bar is not None and bar[2] == "requests":
                bar[0].advance(bar[1], n)

        async def main() -> None:
            ticker = asyncio.ensure_future(_tick(bar)) if bar is not None and bar[2] == "s" else None
            try:
                await run_phase_logged(workload, plan, jsonl_path, progress=advance, started=phases.append)
            finally:
                if ticker:
                    ticker.cancel()

        stopped_by = run_until_stopped(main())
    if not phases:  # stopped before the phase began: nothing to report
        raise KeyboardInterrupt if stopped_by in (None, "SIGINT") else Stopped(signal.Signals[stopped_by])
    phase = phases[0].result()
    result = build_result(phase.recorder, phase.duration_s, phase.cpu_s, phase.wall_s, 1, config)
    return result if stopped_by is None else stopped(result, stopped_by)


async def _tick(bar: Any) -> None:
    started = time.monotonic()
    while True:
        await asyncio.sleep(0.25)
        bar[0].update(bar[1], completed=time.monotonic() - started)


def _run_processes(
    workload: Workload,
    plan: LoadPlan,
    processes: int,
    progress: ProgressMode,
    jsonl_path: str | None,
    config: LoadConfig,
) -> LoadResult:
    recorder = Recorder()
    context = multiprocessing.get_context("spawn")
    stop: KeyboardInterrupt | None = None
    stop_drivers = context.Event()
    pool = ProcessPoolExecutor(processes, mp_context=context, initializer=init_driver, initargs=(stop_drivers,))
    with _progress(progress, plan) as bar, pool:
        futures = [
            pool.submit(run_phase_sync, workload, _plan_for(plan, processes, i), jsonl_path) for i in range(processes)
        ]
        started = time.monotonic()
        try:
            while not all(f.done() for f in futures):
                time.sleep(0.25)
                if bar is not None and bar[2] == "s":
                    bar[0].update(bar[1], completed=time.monotonic() - started)
        except KeyboardInterrupt as exc:
            # Each driver process ends its phase and sends back what it measured.
            stop = exc
            stop_drivers.set()
        outputs: list[dict[str, Any]] = [f.result(timeout=60) for f in futures]
    for output in outputs:
        recorder.merge_dict(output["recorder"])
    duration = max(float(o["duration_s"]) for o in outputs)
    cpu = sum(float(o["cpu_s"]) for o in outputs)
    wall = max(float(o["wall_s"]) for o in outputs)
    result = build_result(recorder, duration, cpu, wall, processes, config)
    return result if stop is None else stopped(result, signal_name(stop))
