"""The step clock on both backends, with a fake clock: what each step
records, and that driving a coroutine through it changes nothing the
coroutine sees (values, exceptions, cancellation, the tasks it starts)."""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._context import TIMELINE
from litellm_perfkit._core._steps import MAX_STEPS, STEP_SIZE
from litellm_perfkit._export._split import Split, split_windows
from tests.support.clock import FakeClock
from tests.support.no_collections import no_collections


def _steps(values: list[int]) -> list[tuple[int, ...]]:
    assert len(values) % STEP_SIZE == 0
    return [tuple(values[i : i + STEP_SIZE]) for i in range(0, len(values), STEP_SIZE)]


def _run(
    backend: Backend, loop: asyncio.AbstractEventLoop, make: Callable[[], Coroutine[Any, Any, Any]]
) -> tuple[Any, list[int]]:
    steps: list[int] = []
    timeline = backend.timeline(0, "POST", "/x")
    timeline.steps = steps

    async def request() -> Any:
        TIMELINE.set(timeline)
        return await backend.middleware._step_accounting.clock(make(), steps, loop)

    return loop.run_until_complete(request()), steps


def _scenario(clock: FakeClock, loop: asyncio.AbstractEventLoop) -> Callable[[], Coroutine[Any, Any, Any]]:
    async def work() -> int:
        clock.advance_ms(1)  # the first step's CPU
        await asyncio.sleep(0)
        clock.advance_ms(2)
        future: asyncio.Future[int] = loop.create_future()

        def complete() -> None:
            clock.advance_ms(5)  # another callback holds the loop
            future.set_result(7)

        loop.call_soon(complete)
        value = await future
        clock.advance_ms(3)
        return value

    return work


def test_each_step_records_when_it_ran_and_the_bounds_of_when_it_was_ready(
    clock: FakeClock, backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    start = clock.now
    result, values = _run(backend, loop, _scenario(clock, loop))
    assert result == 7
    steps = _steps(values)
    assert len(steps) == 3
    ms = 1_000_000
    # The first step runs when armed, so it was ready when it started; it ran 1 ms.
    assert steps[0] == (start, start, start, start + 1 * ms, -1)  # -1: its CPU is its wall time
    # Every step's end is after its start, and ready bounds never pass the start.
    for early, late, begin, end, _ in steps:
        assert early <= late <= begin <= end
    assert steps[1][3] - steps[1][2] == 2 * ms
    assert steps[2][3] - steps[2][2] == 3 * ms
    # The last step waited for the callback that held the loop 5 ms: it could not start before that ended.
    assert steps[2][2] - steps[1][3] == 5 * ms


def test_both_backends_record_the_same_steps(clock: FakeClock, loop: asyncio.AbstractEventLoop) -> None:
    from tests.support import backends

    recorded = []
    for name in backends.NAMES:
        clock.now = 1_000_000_000
        recorded.append(_run(backends.load(name), loop, _scenario(clock, loop)))
    assert recorded[0] == recorded[1]


def test_an_exception_goes_through_and_its_step_is_recorded(
    clock: FakeClock, backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        clock.advance_ms(2)
        raise ValueError("the app's")

    with pytest.raises(ValueError, match="the app's"):
        _run(backend, loop, failing)
    # _run's list is lost with the exception: run again and look at it.
    steps: list[int] = []

    async def request() -> None:
        try:
            await backend.middleware._step_accounting.clock(failing(), steps, loop)
        except ValueError:
            pass

    loop.run_until_complete(request())
    assert len(_steps(steps)) == 2
    assert steps[-2] - steps[-3] == 2_000_000


def test_cancellation_reaches_the_coroutine(
    clock: FakeClock, backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    seen: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        steps: list[int] = []

        async def clocked() -> None:
            await backend.middleware._step_accounting.clock(waits(), steps, loop)

        task = loop.create_task(clocked())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(_steps(steps)) == 2  # the first step, and the one that received the cancellation

    loop.run_until_complete(main())
    assert seen == ["cancelled"]


def test_tasks_a_request_starts_are_clocked_into_its_steps(
    clock: FakeClock, backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    async def child() -> str:
        clock.advance_ms(4)
        await asyncio.sleep(0)
        return "child"

    async def parent() -> str:
        return await asyncio.create_task(child())

    result, values = _run(backend, loop, parent)
    assert result == "child"
    cpu = sorted(end - start for _, _, start, end, _ in _steps(values))
    assert 4_000_000 in cpu
    assert len(cpu) >= 4  # the parent's two steps and the child's two


def _burn_thread_cpu(ms: float) -> None:
    end = time.thread_time_ns() + int(ms * 1e6)
    while time.thread_time_ns() < end:
        pass


@pytest.mark.parametrize("steps_mode", ["on", "cpu"])
def test_with_the_thread_cpu_clock_a_step_records_its_cpu_and_the_split_counts_only_that(
    clock: FakeClock, backend: Backend, loop: asyncio.AbstractEventLoop, steps_mode: str
) -> None:
    """Steps whose wall time (the fake clock) is 50 ms of which they ran
    10 ms on the thread's CPU clock, as preempted steps do, in a request and
    in a task the request starts: ``on`` records no CPU (-1: the wall time),
    ``cpu`` the 10 ms; the split then counts 10 ms of each as CPU and the
    rest of its wall time as waiting to run (queueing)."""
    thread_cpu = steps_mode == "cpu"
    ms = 1_000_000

    async def child() -> None:
        _burn_thread_cpu(10)
        clock.advance_ms(50)

    async def parent() -> None:
        _burn_thread_cpu(10)
        clock.advance_ms(50)
        await asyncio.create_task(child())

    steps: list[int] = []
    timeline = backend.timeline(0, "POST", "/x")
    timeline.steps = steps

    async def request() -> None:
        TIMELINE.set(timeline)
        await backend.middleware._step_accounting.clock(parent(), steps, loop, thread_cpu)

    # Without collections: a full one of the test process's heap (several ms late in a
    # suite run) inside a step is that step's CPU too, and read 15.7 ms once.
    with no_collections():
        loop.run_until_complete(request())
    burning = [step for step in _steps(steps) if step[3] - step[2] >= 50 * ms]
    assert len(burning) == 2  # the parent's first step and the child's
    for _, _, start, end, cpu in burning:
        parts = split_windows(steps, [start, end], [], Split)[0]
        if thread_cpu:
            assert 10 * ms <= cpu <= 15 * ms  # the burn and the step's own bookkeeping, not the 50 ms
            assert parts.cpu_ns == cpu and parts.queue_ns == end - start - cpu
        else:
            assert cpu == -1
            assert parts.cpu_ns == end - start


def test_steps_past_the_limit_are_counted_not_recorded(
    clock: FakeClock, backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    timeline = backend.timeline(0, "POST", "/x")
    timeline.steps = [0] * (STEP_SIZE * MAX_STEPS)

    async def request() -> None:
        TIMELINE.set(timeline)
        await backend.middleware._step_accounting.clock(asyncio.sleep(0), timeline.steps, loop)

    loop.run_until_complete(request())
    assert len(timeline.steps) == STEP_SIZE * MAX_STEPS
    assert timeline.steps_dropped == 2


def test_the_c_clock_is_a_coroutine_that_closes_what_it_drives(loop: asyncio.AbstractEventLoop) -> None:
    """The Python clock is an awaitable; the C one also has a coroutine's methods (the awaiting frame calls them)."""
    from tests.support import backends

    backend = backends.load("c")
    closed: list[str] = []

    async def inner() -> None:
        try:
            await asyncio.sleep(0)
        finally:
            closed.append("closed")

    clock_ = backend.middleware._step_accounting.clock(inner(), [], loop)
    assert isinstance(clock_, collections.abc.Coroutine)
    clock_.send(None)
    clock_.close()
    assert closed == ["closed"]
    with pytest.raises(RuntimeError, match="reuse"):
        clock_.send(None)


def test_the_c_clock_forwards_a_coroutines_attributes_until_it_is_closed(loop: asyncio.AbstractEventLoop) -> None:
    """Code that inspects coroutines (anyio reads cr_frame) reads what the clock drives; a clock that drives
    nothing has none."""
    from tests.support import backends

    backend = backends.load("c")

    async def inner() -> None:
        await asyncio.sleep(0)

    driven = inner()
    clock_ = backend.middleware._step_accounting.clock(driven, [], loop)
    for name in ("cr_running", "cr_frame", "cr_code", "cr_await", "cr_origin", "__name__", "__qualname__"):
        assert getattr(clock_, name) == getattr(driven, name), name
    if sys.version_info >= (3, 11):
        assert clock_.cr_suspended == driven.cr_suspended
    clock_.close()
    unused = type(clock_).__new__(type(clock_))
    with pytest.raises(AttributeError, match="cr_frame"):
        _ = unused.cr_frame


def test_an_exception_thrown_into_the_c_clock_reaches_the_coroutine_and_its_value_comes_back(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """throw() into a native coroutine and into a generator-based awaitable: caught, the coroutine
    returns, and the clock's throw raises StopIteration with that value."""
    from tests.support import backends

    backend = backends.load("c")

    class Awaitable:
        def __await__(self) -> Any:
            try:
                yield
            except KeyError:
                return "generator"

    async def native() -> str:
        try:
            await asyncio.sleep(0)
        except KeyError:
            return "native"
        return "not thrown"

    for make, expected in ((native, "native"), (lambda: Awaitable(), "generator")):
        clock_ = backend.middleware._step_accounting.clock(make(), [], loop)
        clock_.send(None)
        with pytest.raises(StopIteration) as stopped:
            clock_.throw(KeyError("in"))
        assert stopped.value.value == expected


@pytest.mark.parametrize("reentry", ["send", "throw", "close"])
def test_the_c_clock_refuses_to_be_driven_from_inside_its_own_step(
    reentry: str, loop: asyncio.AbstractEventLoop
) -> None:
    """As a running coroutine does (ValueError), and the step goes on: closing the
    clock from inside its step used to free the coroutine it was running (SIGSEGV)."""
    from tests.support import backends

    backend = backends.load("c")
    clocks: list[Any] = []
    refused: list[str] = []

    async def inner() -> int:
        try:
            if reentry == "send":
                clocks[0].send(None)
            elif reentry == "throw":
                clocks[0].throw(RuntimeError("from inside"))
            else:
                clocks[0].close()
        except ValueError as error:
            refused.append(str(error))
        await asyncio.sleep(0)
        return 5

    clocks.append(backend.middleware._step_accounting.clock(inner(), [], loop))
    clocks[0].send(None)
    with pytest.raises(StopIteration) as stop:
        clocks[0].send(None)
    assert stop.value.value == 5
    assert refused == ["coroutine already executing"]


def test_the_c_clock_refuses_to_be_driven_while_it_asks_the_awaitable_for_its_iterator(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """The first step calls the awaitable's __await__: driving the clock from
    there is refused too (a generator refuses it), not a second first step."""
    from tests.support import backends

    backend = backends.load("c")
    clocks: list[Any] = []
    refused: list[str] = []

    class Reentrant:
        def __await__(self) -> Any:
            try:
                clocks[0].send(None)
            except ValueError as error:
                refused.append(str(error))
            return iter([None])

    clocks.append(backend.middleware._step_accounting.clock(Reentrant(), [], loop))
    assert clocks[0].send(None) is None
    with pytest.raises(StopIteration):
        clocks[0].send(None)
    assert refused == ["coroutine already executing"]


def _start(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, Any], name: str, context: contextvars.Context
) -> asyncio.Task[Any]:
    """A task in ``context``: given as ``context=`` where asyncio takes it (3.11), else current when the task is made."""
    if sys.version_info >= (3, 11):
        return loop.create_task(coroutine, name=name, context=context)
    return context.run(loop.create_task, coroutine, name=name)


def test_the_task_factory_keeps_the_hosts_and_reads_the_context_a_task_is_given(
    backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    made: list[asyncio.Task[Any]] = []

    def host_factory(loop: asyncio.AbstractEventLoop, coroutine: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(asyncio.Task(coroutine, loop=loop, **kwargs))
        return made[-1]

    loop.set_task_factory(host_factory)
    timeline = backend.timeline(0, "POST", "/x")
    steps = timeline.steps

    async def child() -> str:
        await asyncio.sleep(0)
        return "child"

    async def main() -> tuple[str, str]:
        backend.middleware._step_accounting.batches_for(loop)  # installs the factory over the host's
        outside = contextvars.copy_context()  # no request in it
        TIMELINE.set(timeline)
        inside = contextvars.copy_context()
        TIMELINE.set(None)
        first = await _start(loop, child(), "in-request", inside)
        clocked = len(steps)
        second = await _start(loop, child(), "outside", outside)
        assert len(steps) == clocked  # a task outside any request is not clocked
        return first, second

    assert loop.run_until_complete(main()) == ("child", "child")
    assert [task.get_name() for task in made[-2:]] == ["in-request", "outside"]
    assert len(steps) == 2 * STEP_SIZE  # the child's two steps


def test_tasks_made_with_and_without_a_context_in_turn_each_run_in_their_own(
    backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    """asyncio calls the factory with ``context=`` or without it, in any order: each task runs in
    the context it was given (else the current one), and every one is clocked."""
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="none")
    timeline = backend.timeline(0, "POST", "/x")

    async def child() -> str:
        await asyncio.sleep(0)
        return marker.get()

    async def main() -> list[str]:
        backend.middleware._step_accounting.batches_for(loop)
        TIMELINE.set(timeline)
        given = contextvars.copy_context()
        given.run(marker.set, "given")
        marker.set("current")
        found = []
        for n in range(6):
            if n % 2:
                found.append(await _start(loop, child(), f"t{n}", given))
            else:
                found.append(await loop.create_task(child(), name=f"t{n}"))
        return found

    assert loop.run_until_complete(main()) == ["current", "given"] * 3
    assert len(timeline.steps) == 12 * STEP_SIZE  # every child clocked: two steps each


def test_a_clocked_tasks_coroutine_answers_inspection_as_the_one_it_drives(
    backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    """anyio asks a task's coroutine for its state (inspect.getcoroutinestate); a task's repr names it.
    The C factory makes its StepClock the task's coroutine; the Python one a native coroutine around it."""
    import inspect

    states: list[str] = []

    async def child() -> None:
        states.append(inspect.getcoroutinestate(asyncio.current_task().get_coro()))  # type: ignore[union-attr]
        await asyncio.sleep(0)

    async def parent() -> None:
        task = asyncio.get_running_loop().create_task(child())
        coroutine = task.get_coro()
        assert asyncio.iscoroutine(coroutine)
        states.append(inspect.getcoroutinestate(coroutine))
        await asyncio.sleep(0)  # the child's first step
        states.append(inspect.getcoroutinestate(coroutine))
        if backend.name == "c":
            assert "child" in repr(task)
        await task
        states.append(inspect.getcoroutinestate(coroutine))

    _, values = _run(backend, loop, parent)
    assert states == [inspect.CORO_CREATED, inspect.CORO_RUNNING, inspect.CORO_SUSPENDED, inspect.CORO_CLOSED]
    assert len(_steps(values)) >= 4  # the child was clocked


def test_on_asyncios_own_loop_the_marker_is_one_handle_put_on_the_ready_queue(backend: Backend) -> None:
    """Where ``call_soon`` is Python (asyncio's loop, not in debug mode) the marker's handle is made once and
    queued as ``call_soon`` would; the batches still begin where the loop's iterations do. Elsewhere
    (uvloop, debug mode) the batches keep ``call_soon``."""
    import uvloop

    from litellm_perfkit._core._steps import marker_queue

    accounting = backend.middleware._step_accounting
    loop = asyncio.new_event_loop()
    try:
        batches = accounting.batches_for(loop)
        assert batches.queue is not None
        starts: list[int] = []

        async def busy() -> None:
            for _ in range(3):
                if not batches.armed:  # as a request's step does
                    batches.arm(time.perf_counter_ns())
                    handles.update(id(item) for item in loop._ready)  # type: ignore[attr-defined]
                batches.steps += 1
                starts.append(batches.start_ns)
                await asyncio.sleep(0)

        handles: set[int] = set()
        loop.run_until_complete(busy())
        assert len(set(starts)) == 3  # a new batch at each of the three iterations
        loop.run_until_complete(asyncio.sleep(0))  # a batch with no step: the marker stops
        assert not batches.armed
        loop.run_until_complete(busy())
        assert len(handles) == 1  # armed twice, the same handle each time
        loop.set_debug(True)
        assert marker_queue(loop, batches) is None
    finally:
        loop.close()
    other = uvloop.new_event_loop()
    try:
        uv_batches = accounting.batches_for(other)
        assert uv_batches.queue is None
    finally:
        other.close()


def test_with_both_backends_on_one_loop_each_factory_clocks_its_own_requests_tasks(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """A process that runs both backends (the benchmarks): their task factories chain on one loop, and a
    request's task is clocked and held once, by its own backend's factory, with no internal error."""
    from litellm_perfkit._core._guard import internal_error_counts
    from tests.support import backends

    python, c = backends.load("python"), backends.load("c")
    errors = dict(internal_error_counts())

    async def child() -> None:
        await asyncio.sleep(0)

    async def main() -> None:
        for backend in (c, python):
            backend.middleware._step_accounting.batches_for(loop)  # the Python factory over the C one
        for backend in (python, c):
            timeline = backend.timeline(0, "POST", "/x")
            TIMELINE.set(timeline)
            task = loop.create_task(child())
            assert timeline.held_tasks == 1  # one hold, not one per factory
            await task
            TIMELINE.set(None)
            assert timeline.held_tasks == 0 and len(timeline.steps) == 2 * STEP_SIZE  # clocked once

    loop.run_until_complete(main())
    assert internal_error_counts() == errors
