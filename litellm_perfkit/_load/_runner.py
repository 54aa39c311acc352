"""Run one load phase: closed loop (N users) or open loop (a rate), in one process.

Open loop: request k has an intended start on a fixed schedule (constant or
Poisson), independent of how fast answers come. Latency counts from that
intended start, so a stalled server is charged for every request it delayed
(no coordinated omission). Closed loop: each user sends its next request
when the previous one ends; intended start = send time.
"""

from __future__ import annotations

import asyncio
import random
import resource
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.synchronize import Event as EventType
from time import perf_counter_ns
from typing import IO, Literal

from .._stop import run_until_stopped
from ..types import Arrival
from ._exchange import Exchange
from ._http import Connection, connect
from ._recorder import Recorder
from ._workload import Workload, WorkloadError

__all__ = ["Arrival", "LoadPlan", "Phase", "PhaseResult", "run_phase"]

Progress = Callable[[int], None]


@dataclass(frozen=True)
class LoadPlan:
    concurrency: int | None = 10  # closed loop: users; open loop: cap on requests in flight
    rate: float | None = None  # requests per second: open loop
    arrival: Arrival = "constant"
    duration_s: float | None = 10.0
    requests: int | None = None
    warmup_s: float = 0.0
    warmup_requests: int = 0
    ramp_s: float = 0.0
    timeout_s: float = 60.0
    seed: int | None = None

    @property
    def mode(self) -> Literal["open", "closed"]:
        return "open" if self.rate else "closed"


@dataclass
class PhaseResult:
    recorder: Recorder
    duration_s: float  # the measured part (after warm-up)
    cpu_s: float  # this process's CPU time over the whole phase
    wall_s: float


class _Pool:
    """Idle keep-alive connections to one host; to several instances of it, new
    connections go to each in turn (a closed loop's users spread evenly)."""

    def __init__(self, workload: Workload, timeout_s: float) -> None:
        self.workload = workload
        self.timeout_s = timeout_s
        self.idle: list[Connection] = []
        self._ports = (workload.port, *workload.instance_ports)
        self._opened = 0

    async def get(self) -> Connection:
        while self.idle:
            connection = self.idle.pop()
            if not connection.closed:
                return connection
        port = self._ports[self._opened % len(self._ports)]
        self._opened += 1
        return await connect(self.workload.host, port, self.timeout_s)

    def put(self, connection: Connection) -> None:
        if connection.reusable and not connection.closed:
            self.idle.append(connection)
        elif connection.transport is not None:
            connection.transport.close()

    def close(self) -> None:
        for connection in self.idle:
            if connection.transport is not None:
                connection.transport.close()
        self.idle.clear()


async def _one(pool: _Pool, workload: Workload, rng: random.Random, intended_ns: int, timeout_s: float) -> Exchange:
    request, trace_id, model = workload.build(rng)
    exchange = Exchange(intended_ns=intended_ns, trace_id=trace_id, model=model)
    try:
        connection = await pool.get()
    except ConnectionRefusedError as exc:
        exchange.error, exchange.detail = "connection_refused", str(exc)
    except asyncio.TimeoutError:
        exchange.error, exchange.detail = "timeout", "connect timed out"
    except OSError as exc:
        exchange.error, exchange.detail = "connect_error", str(exc)
    else:
        await connection.send(request, exchange, timeout_s)
        pool.put(connection)
    if not exchange.end_ns:
        exchange.end_ns = perf_counter_ns()
    return exchange


class Phase:
    """One phase's shared state: the schedule's bounds, the counts, the recorder."""

    def __init__(self, workload: Workload, plan: LoadPlan, progress: Progress | None, jsonl: IO[bytes] | None) -> None:
        self.workload, self.plan, self.progress = workload, plan, progress
        self.cpu_before = _cpu()
        self.rng = random.Random(plan.seed)
        self.pool = _Pool(workload, plan.timeout_s)
        self.started_ns = perf_counter_ns()
        self.measure_from = self.started_ns + int(plan.warmup_s * 1e9)
        self.recorder = Recorder(jsonl=jsonl, start_ns=self.measure_from)
        self.deadline = (
            self.started_ns + int(((plan.duration_s or 0) + plan.warmup_s) * 1e9) if plan.duration_s else None
        )
        self.total = (plan.requests + plan.warmup_requests) if plan.requests else None
        self.issued = 0
        self.stopping = False

    def more(self) -> bool:
        if self.stopping:
            return False
        if self.total is not None and self.issued >= self.total:
            return False
        return self.deadline is None or perf_counter_ns() < self.deadline

    def next_index(self) -> int:
        index = self.issued
        self.issued += 1
        return index

    async def one(self, intended_ns: int, index: int) -> None:
        exchange = await _one(self.pool, self.workload, self.rng, intended_ns, self.plan.timeout_s)
        if exchange.intended_ns >= self.measure_from and index >= self.plan.warmup_requests:
            self.recorder.record(exchange, self.workload.stream)
        if self.progress is not None:
            self.progress(1)

    def result(self) -> PhaseResult:
        """What it measured, at its end or whenever it was stopped."""
        ended_ns = perf_counter_ns()
        end = min(ended_ns, self.deadline) if self.deadline else ended_ns
        measured_ns = end - max(self.measure_from, self.started_ns)
        return PhaseResult(
            self.recorder, max(measured_ns, 1) / 1e9, _cpu() - self.cpu_before, (ended_ns - self.started_ns) / 1e9
        )


async def _closed_loop(phase: Phase) -> None:
    """N users, each sending its next request when the last one ends."""
    plan = phase.plan
    users = plan.concurrency or 1

    async def user(number: int) -> None:
        if plan.ramp_s:
            await asyncio.sleep(plan.ramp_s * number / users)
        while phase.more():
            await phase.one(perf_counter_ns(), phase.next_index())

    await asyncio.gather(*(user(n) for n in range(users)))


async def _open_loop(phase: Phase) -> None:
    """Requests on a fixed schedule (constant or Poisson), whatever the answers."""
    plan = phase.plan
    assert plan.rate is not None
    tasks: set[asyncio.Task[None]] = set()
    next_ns = phase.started_ns
    # With --concurrency as well, at most that many requests are in flight
    # (wrk2-style). A request waiting for a slot keeps its intended start:
    # the wait counts in the corrected latency, not in the uncorrected one.
    slots = asyncio.Semaphore(plan.concurrency) if plan.concurrency else None

    async def fire(intended: int, index: int) -> None:
        if slots is None:
            await phase.one(intended, index)
            return
        async with slots:
            await phase.one(intended, index)

    while phase.more():
        now = perf_counter_ns()
        if next_ns > now:
            await asyncio.sleep((next_ns - now) / 1e9)
        task = asyncio.ensure_future(fire(next_ns, phase.next_index()))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        elapsed_s = (next_ns - phase.started_ns) / 1e9
        rate = plan.rate * (min(1.0, max(0.05, elapsed_s / plan.ramp_s)) if plan.ramp_s else 1.0)
        gap_s = phase.rng.expovariate(rate) if plan.arrival == "poisson" else 1 / rate
        next_ns += int(gap_s * 1e9)
        if phase.deadline is not None and next_ns >= phase.deadline:
            break
    if tasks:
        await asyncio.gather(*tasks)


async def run_phase(
    workload: Workload,
    plan: LoadPlan,
    progress: Progress | None = None,
    jsonl: IO[bytes] | None = None,
    started: Callable[[Phase], None] | None = None,
) -> PhaseResult:
    """One phase; ``started`` gets the phase first, so a caller that is stopped
    midway can still take what it measured (``Phase.result``)."""
    phase = Phase(workload, plan, progress, jsonl)
    if started is not None:
        started(phase)
    users = asyncio.ensure_future(_closed_loop(phase) if plan.mode == "closed" else _open_loop(phase))
    try:
        await asyncio.shield(users)
    except asyncio.CancelledError:
        # Cancelling is not enough: on Python 3.11 asyncio.wait_for swallows a
        # cancel that comes as its answer does, and that user would run on to
        # the deadline. Each user checks ``stopping`` before its next request.
        phase.stopping = True
        users.cancel()
        await asyncio.wait((users,))
        raise
    finally:
        phase.pool.close()
    return phase.result()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_phase_logged(
    workload: Workload,
    plan: LoadPlan,
    jsonl_path: str | None,
    progress: Progress | None = None,
    started: Callable[[Phase], None] | None = None,
) -> PhaseResult:
    """run_phase, appending one JSON line per request to ``jsonl_path`` when given.
    A write that fails (a full disk) raises WorkloadError once the phase is over."""
    jsonl = open(jsonl_path, "ab") if jsonl_path else None  # noqa: SIM115
    failed: OSError | None = None
    try:
        result = await run_phase(workload, plan, progress=progress, jsonl=jsonl, started=started)
        failed = result.recorder.jsonl_error
    finally:
        if jsonl:
            try:
                jsonl.close()
            except OSError as exc:  # flushing what was buffered
                failed = failed or exc
    if failed is not None:
        raise WorkloadError(f"cannot write {jsonl_path}: {failed.strerror or failed}")
    return result


_parent_stop: list[EventType] = []  # in a driver process, from init_driver


def init_driver(stop: EventType) -> None:
    """Initializer of driver processes. Their parent asks them to stop by
    setting ``stop``, not with a signal: a signal kills a process that is still
    importing, which breaks the pool and loses every other process's measurements."""
    _parent_stop[:] = [stop]


def run_phase_sync(workload: Workload, plan: LoadPlan, jsonl_path: str | None = None) -> dict[str, object]:
    """For driver processes: run on the fastest loop, return a mergeable dict.
    A stop signal, or the parent's stop, ends the phase early: what it measured comes back."""
    phases: list[Phase] = []
    stop_requested = _parent_stop[0].is_set if _parent_stop else None
    stopped_by = run_until_stopped(run_phase_logged(workload, plan, jsonl_path, started=phases.append), stop_requested)
    if not phases:
        raise RuntimeError("the phase did not start")
    result = phases[0].result()
    return {
        "stopped_by": stopped_by,
        "recorder": result.recorder.to_dict(),
        "duration_s": result.duration_s,
        "cpu_s": result.cpu_s,
        "wall_s": result.wall_s,
    }
