from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from litellm_perfkit import current_timeline
from litellm_perfkit._core import open_stage
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._fields import SUM_CALL
from litellm_perfkit._core._threads import in_thread
from litellm_perfkit._core._timeline import OPEN_STAGE, TIMELINE, Timeline
from tests.core.test_after import _respond, _serve
from tests.support import backends
from tests.support.capture import Captured
from tests.support.clock import FakeClock


@pytest.fixture
def timeline(clock: FakeClock, backend: Backend) -> Timeline:
    timeline = backend.timeline(clock(), "POST", "/x")
    token = TIMELINE.set(timeline)
    yield timeline
    TIMELINE.reset(token)


def durations(timeline: Timeline) -> dict[str, float]:
    return {e.name: e.duration_ns / 1e6 for e in timeline.freeze().stages}


def test_nested_stages_nest_and_add_up(clock: FakeClock, timeline: Timeline, backend: Backend) -> None:
    with backend.stage("outer"):
        clock.advance_ms(1)
        with backend.stage("inner.a"):
            clock.advance_ms(2)
        with backend.stage("inner.b"):
            clock.advance_ms(3)
        clock.advance_ms(0.5)
    assert durations(timeline) == {"outer": 6.5, "inner.a": 2, "inner.b": 3}
    record = timeline.freeze()
    outer, a, b = record.stages
    assert (outer.parent, a.parent, b.parent) == (-1, 0, 0)
    children = sum(s.duration_ns for s in record.stages if s.parent == 0)
    assert children + 1_500_000 == record.stages[0].duration_ns


def test_async_context_manager_and_decorators(clock: FakeClock, timeline: Timeline, backend: Backend) -> None:
    @backend.stage("sync.fn")
    def sync_fn() -> int:
        clock.advance_ms(1)
        return 7

    @backend.stage("async.fn")
    async def async_fn() -> int:
        clock.advance_ms(2)
        await asyncio.sleep(0)
        return 8

    async def main() -> tuple[int, int]:
        async with backend.stage("async.cm"):
            clock.advance_ms(4)
        return sync_fn(), await async_fn()

    assert asyncio.run(main()) == (7, 8)
    assert durations(timeline) == {"async.cm": 4, "sync.fn": 1, "async.fn": 2}


def test_exceptions_close_the_stage(clock: FakeClock, timeline: Timeline, backend: Backend) -> None:
    with pytest.raises(ValueError):
        with backend.stage("boom"):
            clock.advance_ms(1)
            raise ValueError("x")
    assert durations(timeline) == {"boom": 1}
    assert OPEN_STAGE.get() is None


def test_async_generator_counts_own_time_and_items(clock: FakeClock, timeline: Timeline, backend: Backend) -> None:
    @backend.stage("stream.iterate")
    async def generator() -> AsyncIterator[int]:
        for i in range(3):
            clock.advance_ms(1)  # own work
            await asyncio.sleep(0)  # suspension: the loop runs others
            yield i

    async def other_task() -> None:
        for _ in range(10):
            clock.advance_ms(5)  # someone else's time, while the generator is suspended
            await asyncio.sleep(0)

    async def main() -> list[int]:
        other = asyncio.create_task(other_task())
        items = [item async for item in generator()]
        await other
        return items

    assert asyncio.run(main()) == [0, 1, 2]
    [entry] = timeline.freeze().stages
    assert entry.kind == "generator"
    assert entry.items == 3
    assert entry.self_ns == 3_000_000
    assert entry.end_ns - entry.start_ns > entry.self_ns


def test_generator_time_sums_per_request_across_generators(
    clock: FakeClock, timeline: Timeline, backend: Backend
) -> None:
    @backend.stage("gen")
    async def generator(n: int) -> AsyncIterator[int]:
        for i in range(n):
            clock.advance_ms(2)
            yield i

    async def main() -> None:
        [_ async for _ in generator(2)]
        [_ async for _ in generator(3)]

    asyncio.run(main())
    [entry] = timeline.freeze().stages
    assert (entry.items, entry.self_ns) == (5, 10_000_000)


def test_outside_a_request_everything_is_a_no_op(backend: Backend) -> None:
    assert current_timeline() is None

    @backend.stage("gen")
    async def generator() -> AsyncIterator[int]:
        yield 1

    raw = generator()
    # No wrapper layer at all: the original async generator comes back.
    assert type(raw).__name__ == "async_generator" and raw.ag_code.co_name == "generator"  # type: ignore[attr-defined]
    with backend.stage("x"):
        pass

    @backend.stage("f")
    def f() -> int:
        return 1

    assert f() == 1
    asyncio.run(raw.aclose())


def test_generator_closed_early_still_records(clock: FakeClock, timeline: Timeline, backend: Backend) -> None:
    closed = []

    @backend.stage("gen")
    async def generator() -> AsyncIterator[int]:
        try:
            for i in range(10):
                clock.advance_ms(1)
                yield i
        finally:
            closed.append(True)

    async def main() -> None:
        agen = generator()
        assert await agen.__anext__() == 0
        assert await agen.__anext__() == 1
        await agen.aclose()

    asyncio.run(main())
    assert closed == [True]
    [entry] = timeline.freeze().stages
    assert (entry.items, entry.self_ns) == (2, 2_000_000)


def test_stages_in_a_task_nest_under_the_stage_that_created_it(
    clock: FakeClock, timeline: Timeline, backend: Backend
) -> None:
    async def hook() -> None:
        with backend.stage("hooks.during_call"):
            clock.advance_ms(1)

    async def main() -> None:
        with backend.stage("outer"):
            task = asyncio.create_task(hook())
            with backend.stage("sibling"):
                await asyncio.sleep(0)  # the task runs while "sibling" is open
            await task

    asyncio.run(main())
    stages = timeline.freeze().stages
    outer = next(n for n, e in enumerate(stages) if e.name == "outer")
    by_name = {e.name: e for e in stages}
    assert by_name["hooks.during_call"].parent == outer
    assert by_name["sibling"].parent == outer


def test_reconciliation_uses_exclusive_time(clock: FakeClock, timeline: Timeline, backend: Backend) -> None:
    from litellm_perfkit._export._spans import reconcile

    with backend.stage("auth"):
        clock.advance_ms(2)
    with backend.stage("llm_call"):
        clock.advance_ms(1)
        with backend.stage("upstream"):
            clock.advance_ms(50)
        clock.advance_ms(3)
    clock.advance_ms(4)  # in no stage
    timeline.end_ns = clock()
    total, upstream, attributed, unattributed = reconcile(timeline.freeze())
    assert (total, upstream, attributed, unattributed) == (60_000_000, 50_000_000, 6_000_000, 4_000_000)


# Python 3.12's eager tasks run their first step inside the step that creates them.
EAGER = [False, True] if sys.version_info >= (3, 12) else [False]


def _served_nesting(
    backend: Backend, records: Captured, eager: bool
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """A request with step accounting on (the C stage keeps the open stage on the running task's
    StepClock, csrc/steps.c): what ``open_stage()`` reads at each point, and each stage's parent."""
    seen: dict[str, str | None] = {}

    def where(at: str) -> None:
        stage = open_stage()
        seen[at] = None if stage is None else stage.name

    async def child(name: str) -> None:
        where(f"{name}: before its stage")
        with backend.stage(name):
            await asyncio.sleep(0)
            where(f"{name}: inside")

    async def generator() -> AsyncIterator[None]:
        with backend.stage("generator"):
            yield
            where("generator: resumed by another task")
            yield

    async def resume(iterator: AsyncIterator[None]) -> None:
        await iterator.__anext__()

    def in_a_thread() -> None:
        where("thread: at its start")
        with backend.stage("in a thread"):
            where("thread: inside its stage")
        where("thread: after its stage")

    @backend.stage("decorated")
    async def decorated() -> None:
        where("decorated: inside")
        await asyncio.create_task(child("in decorated"))
        decorated_sync()

    @backend.stage("decorated sync")
    def decorated_sync() -> None:
        where("decorated sync: inside")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        with backend.stage("outer"):
            late = asyncio.create_task(child("late"))  # its first step comes after "outer" closed
        await late
        await decorated()
        await asyncio.gather(decorated())  # the call as a task's coroutine
        with backend.stage("outer 2"):
            with backend.stage("sibling"):
                early = asyncio.create_task(child("early"))
                await asyncio.sleep(0)
                where("sibling: after the task's first step")
                await early
            where("outer 2: after sibling")
            context = contextvars.copy_context()  # as LiteLLM hands a call to a thread
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, in_thread(functools.partial(context.run, in_a_thread)))
            where("outer 2: after the thread")
            if eager:
                with backend.stage("around an eager task"):
                    task = asyncio.create_task(child("eager"))  # its first step runs here
                    where("around an eager task: after the task's first step")
                    await task
            iterator = generator()
            await iterator.__anext__()
            where("outer 2: the generator's stage open")
            await asyncio.create_task(resume(iterator))
            where("outer 2: after the generator moved")
            with pytest.raises(StopAsyncIteration):
                await asyncio.create_task(resume(iterator))  # its stage exits in that task
            where("outer 2: after the generator ended in another task")
        where("app: at the end")
        await _respond(send)

    loop = asyncio.new_event_loop()
    if eager:
        loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
    _serve(backend, app, loop)
    loop.close()
    [record] = records
    parents = {s.name: None if s.parent < 0 else record.stages[s.parent].name for s in record.stages}
    return seen, parents


@pytest.mark.parametrize("eager", EAGER, ids=lambda eager: "eager tasks" if eager else "tasks")
def test_with_steps_on_stages_nest_by_task_alike_on_both_backends(records: Captured, eager: bool) -> None:
    """Tasks started inside a stage (one whose first step comes after the stage closed; an eager one
    whose first step runs inside its maker's), a generator resumed and ended by other tasks, and a
    thread given a context copied inside a clocked step: the C backend, which keeps the open stage on
    the task's clock, nests them as the Python one, which keeps it in the context."""
    python = _served_nesting(backends.load("python"), records, eager)
    records.clear()
    c = _served_nesting(backends.load("c"), records, eager)
    assert c == python
    seen, parents = c
    assert parents["late"] == "outer" and parents["early"] == "sibling" and parents["in a thread"] == "outer 2"
    assert seen["late: before its stage"] == "outer" and seen["early: inside"] == "early"
    assert seen["sibling: after the task's first step"] == "sibling"
    assert seen["generator: resumed by another task"] == "generator"
    assert seen["thread: at its start"] == "outer 2" and seen["thread: inside its stage"] == "in a thread"
    assert seen["app: at the end"] is None
    assert seen["decorated: inside"] == "decorated" and seen["decorated sync: inside"] == "decorated sync"
    assert parents["in decorated"] == "decorated" and parents["decorated sync"] == "decorated"
    if eager:
        assert parents["eager"] == "around an eager task"
        assert seen["eager: before its stage"] == "around an eager task"
        assert seen["around an eager task: after the task's first step"] == "around an eager task"


def test_decorated_functions_look_like_what_they_wrap(timeline: Timeline, backend: Backend) -> None:
    """What asyncio, inspect and FastAPI read of a function (whether to await it or run it in a thread,
    its signature), a method's binding, and the call as a task's coroutine: the C decorator's function
    (csrc/staged.c) as the Python wrapper."""

    async def original(a: int, *, b: str = "x") -> str:
        return f"{a}{b}"

    def sync_original(a: int) -> int:
        return a

    class Service:
        @backend.stage("service.method")
        async def method(self, value: int) -> int:
            return value + 1

        @staticmethod
        @backend.stage("service.static")
        async def static(value: int) -> int:
            return value + 2

    decorated = backend.stage("f")(original)
    sync_decorated = backend.stage("g")(sync_original)
    assert inspect.iscoroutinefunction(decorated) and asyncio.iscoroutinefunction(decorated)
    assert not inspect.iscoroutinefunction(sync_decorated) and not asyncio.iscoroutinefunction(sync_decorated)
    assert inspect.signature(decorated) == inspect.signature(original)
    assert (decorated.__name__, decorated.__wrapped__) == ("original", original)
    assert sync_decorated(3) == 3

    async def main() -> None:
        call = decorated(1, b="y")
        assert asyncio.iscoroutine(call) and inspect.isawaitable(call)
        assert await call == "1y"
        assert await asyncio.create_task(decorated(2)) == "2x"
        assert await asyncio.gather(decorated(3), Service().method(4), Service.static(5)) == ["3x", 5, 7]

    asyncio.run(main())
    assert [s.name for s in timeline.freeze().stages] == ["g", "f", "f", "f", "service.method", "service.static"]


def test_an_async_stage_call_driven_by_hand_ends_as_the_wrapper_does(clock: FakeClock, backend: Backend) -> None:
    """send, throw and close on the call, as a framework drives a coroutine: a throw before its first
    step runs nothing and records nothing; after it, the stage ends with the call, however it ends."""

    class Suspend:
        def __await__(self) -> Any:
            yield "suspended"

    @backend.stage("driven")
    async def driven(fail: bool) -> int:
        clock.advance_ms(1)
        await Suspend()
        clock.advance_ms(2)
        if fail:
            raise KeyError("inner")
        return 5

    def run(steps: Any) -> tuple[Any, list[tuple[str, int]]]:
        timeline = backend.timeline(clock(), "GET", "/")
        token = TIMELINE.set(timeline)
        try:
            outcome = steps()
        finally:
            TIMELINE.reset(token)
        return outcome, [(s.name, s.duration_ns // 1_000_000) for s in timeline.freeze().stages]

    def returned() -> Any:
        call = driven(False)
        assert call.send(None) == "suspended"
        with pytest.raises(StopIteration) as stop:
            call.send(None)
        with pytest.raises(RuntimeError):
            call.send(None)
        return stop.value.value

    def raised() -> Any:
        call = driven(True)
        call.send(None)
        with pytest.raises(KeyError):
            call.send(None)
        return "raised"

    def thrown_before() -> Any:
        call = driven(False)
        with pytest.raises(ValueError):
            call.throw(ValueError("early"))
        return "thrown before"

    def thrown_after() -> Any:
        call = driven(False)
        call.send(None)
        with pytest.raises(ValueError):
            call.throw(ValueError("late"))
        return "thrown after"

    def closed() -> Any:
        call = driven(False)
        call.send(None)
        call.close()
        call.close()
        return "closed"

    def dropped() -> Any:
        def suspend() -> None:
            call = driven(False)
            call.send(None)

        # Freed while suspended, with the context its stage is open in (a task's): closed, as a coroutine is.
        contextvars.copy_context().run(suspend)
        return "dropped"

    assert run(returned) == (5, [("driven", 3)])
    assert run(raised) == ("raised", [("driven", 3)])
    assert run(thrown_before) == ("thrown before", [])
    assert run(thrown_after) == ("thrown after", [("driven", 1)])
    assert run(closed) == ("closed", [("driven", 1)])
    assert run(dropped) == ("dropped", [("driven", 1)])
    assert OPEN_STAGE.get() is None


def test_outside_a_request_a_decorated_function_returns_what_the_function_returns() -> None:
    """With the accelerator, no layer at all: the function's own coroutine."""
    c = backends.load("c")

    async def original() -> int:
        return 1

    call = c.stage("f")(original)()
    assert inspect.iscoroutine(call) and call.cr_code is original.__code__
    assert asyncio.run(call) == 1


def _summed_calls(backend: Backend, clock: FakeClock) -> tuple[Any, list[str | None]]:
    """Sync and async functions summed into sum stages, called under two stages, one raising: the
    timeline, and the stage open inside each call."""
    seen: list[str | None] = []

    def where() -> None:
        stage = open_stage()
        seen.append(None if stage is None else stage.name)

    def check(value: int) -> int:
        where()
        clock.advance_ms(1)
        if value < 0:
            raise ValueError(value)
        return value

    async def hook(value: int) -> int:
        where()
        clock.advance_ms(2)
        await asyncio.sleep(0)
        clock.advance_ms(1)
        return value

    summed_check = backend.stage._summed("callbacks.check", check)
    summed_hook = backend.stage._summed("stream.hooks", hook)
    assert asyncio.iscoroutinefunction(summed_hook) and not asyncio.iscoroutinefunction(summed_check)
    timeline = backend.timeline(clock(), "POST", "/x")
    token = TIMELINE.set(timeline)

    async def main() -> None:
        with backend.stage("endpoint"):
            assert summed_check(1) == 1 and await summed_hook(2) == 2
        with backend.stage("response"):
            for n in range(3):
                assert summed_check(n) == n and await summed_hook(n) == n
            with pytest.raises(ValueError):
                summed_check(-1)

    try:
        asyncio.run(main())
    finally:
        TIMELINE.reset(token)
    assert summed_check(5) == 5 and asyncio.run(summed_hook(6)) == 6  # outside a request: nothing recorded
    return timeline, seen


def _entries(timeline: Any) -> dict[str, list[Any]]:
    return {name: list(entry) for name, entry in timeline.generators.items()}


def test_summed_calls_add_up_alike_on_both_backends() -> None:
    """Stage._summed: the C function (csrc/staged.c) folds each call into the stage's entry as the
    Python wrappers do through Timeline.add_generator_time, the stage open in each call its caller's."""
    from tests.support.clock import installed

    with installed() as clock:
        python_timeline, python_seen = _summed_calls(backends.load("python"), clock)
    with installed() as clock:
        c_timeline, seen = _summed_calls(backends.load("c"), clock)
    entries = _entries(c_timeline)
    assert (entries, seen) == (_entries(python_timeline), python_seen)
    assert entries["callbacks.check"][4:6] == [5_000_000, 5] and entries["stream.hooks"][4:6] == [12_000_000, 4]
    assert seen == ["endpoint", "endpoint"] + ["response"] * 7 + [None, None]


def test_the_c_timelines_sum_stages_keep_their_calls_raw_and_both_encoders_write_a_list() -> None:
    """csrc/staged.c keeps a sum stage's calls in an Int64List (no int per call's start, end and parent,
    no Python call for its first). The C hand-off encoder writes them as the reference's list, and so does
    Timeline.encode for a timeline the C encoder declines (an int past 64 bits)."""
    from litellm_perfkit._core._fields import GeneratorEntry
    from litellm_perfkit._core._timeline import decode
    from tests.support.clock import installed

    c = backends.load("c")
    with installed() as clock:
        timeline, _ = _summed_calls(c, clock)
        timeline.end_ns = clock()
    calls = timeline.generators["callbacks.check"][GeneratorEntry.INTERVALS]
    assert type(calls) is c.speedups.Int64List and len(calls) == 5 * len(SUM_CALL)
    written = decode(timeline.encode())
    assert written == timeline.freeze()
    timeline.attributes["huge"] = 1 << 70
    assert decode(timeline.encode()) == timeline.freeze()
    checks = [stage for stage in written.stages if stage.name == "callbacks.check"]
    assert [len(stage.intervals) // 2 for stage in checks] == [1, 4]  # a record keeps each call's start and end


@pytest.mark.parametrize("driver", ["python", "c"])
def test_a_generators_step_timer_counts_own_time_the_longest_gap_and_lets_everything_through(
    clock: FakeClock, driver: str
) -> None:
    """_stage._Timed and the C accelerator's OwnTime, item by item: own time is the steps' time only,
    the gap is from the start (or an item) to the next item, and values, exceptions and close pass."""
    from litellm_perfkit._core._stage import _Timed

    make = _Timed if driver == "python" else backends.load("c").speedups.OwnTime
    closed: list[str] = []

    async def generator() -> AsyncIterator[int]:
        try:
            clock.advance_ms(1)
            yield 1
            clock.advance_ms(2)
            await asyncio.sleep(0)  # suspended: the other task's 5 ms is not own time
            clock.advance_ms(3)
            yield 2
            raise KeyError("out")
        finally:
            closed.append("generator")

    async def other() -> None:
        clock.advance_ms(5)

    async def main() -> tuple[list[int], str]:
        timed = make()
        source = generator()
        items = []
        task = asyncio.create_task(other())
        for _ in range(2):
            timed.awaitable = source.__anext__()
            items.append(await timed)
        await task
        timed.awaitable = source.__anext__()
        try:
            await timed
        except KeyError as error:
            raised = str(error)
        assert (timed.own_ns, timed.max_gap_ns) == (6_000_000, 10_000_000)
        closing = make()
        second = generator()
        closing.awaitable = second.__anext__()
        assert await closing == 1
        closing.awaitable = second.__anext__()
        iterator = closing.__await__()
        with pytest.raises(GeneratorExit):
            iterator.throw(GeneratorExit)
        return items, raised

    assert asyncio.run(main()) == ([1, 2], "'out'")
    assert closed == ["generator", "generator"]


@pytest.mark.parametrize("name", ["python", "c"])
def test_a_summed_call_times_its_awaitable_as_one_call_with_its_flag_set_meanwhile(clock: FakeClock, name: str) -> None:
    """_stage._summed_call and the C accelerator's summed_call (a wait for more of a stream's body):
    one call of the sum stage from the first step to the last, the flag True only while it runs,
    reset whether it returns or raises; outside a request, the awaitable alone."""
    from litellm_perfkit._core._stage import _summed_call

    backend = backends.load(name)
    summed = _summed_call if name == "python" else backend.speedups.summed_call
    flag: contextvars.ContextVar[bool] = contextvars.ContextVar("flag", default=False)
    seen: list[bool] = []

    async def wait(fail: bool) -> int:
        seen.append(flag.get())
        clock.advance_ms(2)
        await asyncio.sleep(0)
        clock.advance_ms(3)
        seen.append(flag.get())
        if fail:
            raise KeyError("upstream")
        return 7

    async def main() -> tuple[int, int]:
        outside = await summed("stream.wait", wait(False), flag)
        timeline = backend.timeline(clock(), "POST", "/x")
        TIMELINE.set(timeline)
        value = await summed("stream.wait", wait(False), flag)
        assert flag.get() is False
        with pytest.raises(KeyError):
            await summed("stream.wait", wait(True), flag)
        assert flag.get() is False
        [entry] = timeline.freeze().stages
        assert (entry.name, entry.kind, entry.items, entry.self_ns) == ("stream.wait", "sum", 2, 10_000_000)
        return outside, value

    assert asyncio.run(main()) == (7, 7)
    assert seen == [False, False, True, True, True, True]
