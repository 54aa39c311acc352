from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from litellm_perfkit import current_timeline
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._timeline import OPEN_STAGE, TIMELINE, Timeline
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
