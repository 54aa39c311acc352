"""Work a request hands to a thread pool (_core/_threads.py): the thread's
CPU is the request's, in the ``threads`` stage, and the time split counts
it as CPU, not waiting, in the windows around it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from litellm_perfkit._core import _threads
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._threads import in_thread
from litellm_perfkit._export._spans import reconcile, record_to_spans
from litellm_perfkit._export._split import time_split
from litellm_perfkit._wire._names import AFTER_RESPONSE_STAGE, AFTER_RESPONSE_THREAD_STAGE, THREAD_STAGE
from litellm_perfkit.types import RequestRecord
from tests.core.test_after import _logging, _respond, _served, _until
from tests.support.capture import Captured
from tests.support.clock import FakeClock, installed

MS = 1_000_000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    with installed() as clock:
        cpu = [0]
        monkeypatch.setattr(_threads, "thread_time_ns", lambda: cpu[0])
        clock.thread_cpu = cpu  # type: ignore[attr-defined]
        yield clock


def _work(clock: FakeClock, wall_ms: float, cpu_ms: float) -> Any:
    """Work for a thread, handed over from the running loop: it moves the shared
    fake clock only once the loop's step that handed it over has ended."""
    handed_over = threading.Event()
    asyncio.get_running_loop().call_soon(handed_over.set)  # runs when the current step has ended

    def work() -> str:
        assert handed_over.wait(30), "the loop's step never ended"
        clock.advance_ms(wall_ms)
        clock.thread_cpu[0] += int(cpu_ms * MS)  # type: ignore[attr-defined]
        return "done"

    return work


def _stage(record: RequestRecord, name: str) -> int:
    return next(n for n, stage in enumerate(record.stages) if stage.name == name)


def test_a_threads_cpu_is_the_requests_cpu_inside_the_stage_that_handed_it_over(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        with backend.stage("llm_call"):
            clock.advance_ms(1)
            result = await asyncio.get_running_loop().run_in_executor(None, in_thread(_work(clock, 5, 4)))
            assert result == "done"
        await _respond(send)

    _served(backend, app)
    [record] = records
    threads = record.stages[_stage(record, THREAD_STAGE)]
    llm_call = _stage(record, "llm_call")
    assert threads.kind == "thread" and threads.items == 1 and threads.parent == llm_call
    assert threads.self_ns == 4 * MS and threads.duration_ns == 5 * MS
    split = time_split(record)
    assert split is not None
    assert split.stages[_stage(record, THREAD_STAGE)] == (4 * MS, 0, 1 * MS, 0)
    # llm_call's own 1 ms and its thread's 4 ms are CPU; the thread's other 1 ms is waiting.
    assert split.stages[llm_call].cpu_ns == 5 * MS
    assert split.request.cpu_ns == 5 * MS
    total, upstream, attributed, unattributed = reconcile(record)
    assert (total, attributed, unattributed) == (6 * MS, 6 * MS, 0)  # the thread's 5 ms inside llm_call, once


def test_a_thread_handed_over_after_the_response_is_after_response_work(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    async def cost() -> None:
        await asyncio.get_running_loop().run_in_executor(None, in_thread(_work(clock, 3, 2)))

    done, log = _logging(cost)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asyncio.get_running_loop().create_task(log())
        await _respond(send)

    async def then() -> None:
        await done.wait()
        await _until(lambda: len(records) == 1)  # handed off once the task has ended

    _served(backend, app, then)
    [record] = records
    after, threads = _stage(record, AFTER_RESPONSE_STAGE), _stage(record, AFTER_RESPONSE_THREAD_STAGE)
    assert record.stages[threads].parent == after
    split = time_split(record)
    assert split is not None and split.stages[after].cpu_ns == 2 * MS and split.request.cpu_ns == 0
    total, upstream, attributed, unattributed = reconcile(record)
    assert attributed == 0  # neither is part of the request's wall time


def test_outside_a_request_the_function_is_handed_over_as_it_is() -> None:
    def work() -> None:
        return None

    assert in_thread(work) is work


def test_calls_under_different_stages_are_one_threads_stage_each(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        loop = asyncio.get_running_loop()
        with backend.stage("llm_call"):
            await loop.run_in_executor(None, in_thread(_work(clock, 2, 1)))
            await loop.run_in_executor(None, in_thread(_work(clock, 2, 1)))
        with backend.stage("response"):  # opened after the first call was recorded
            await loop.run_in_executor(None, in_thread(_work(clock, 3, 3)))
        await _respond(send)

    _served(backend, app)
    [record] = records
    threads = {record.stages[stage.parent].name: stage for stage in record.stages if stage.name == THREAD_STAGE}
    assert all(record.stages.index(stage) > stage.parent for stage in threads.values())  # each after its parent
    record_to_spans(record, "ab" * 16, "", 0)
    assert (threads["llm_call"].items, threads["llm_call"].self_ns, threads["llm_call"].duration_ns) == (
        2,
        2 * MS,
        4 * MS,
    )
    assert (threads["response"].items, threads["response"].self_ns, threads["response"].duration_ns) == (
        1,
        3 * MS,
        3 * MS,
    )
    total, upstream, attributed, unattributed = reconcile(record)
    assert (total, upstream, attributed, unattributed) == (7 * MS, 0, 7 * MS, 0)  # the injected 2 + 2 + 3 ms


# Injected costs (ms) of a request: stages, a thread inside llm_call, and time outside any stage.
AUTH_MS, LLM_CALL_OWN_MS, THREAD_WALL_MS, THREAD_CPU_MS, UPSTREAM_MS, UNSTAGED_MS = 2, 1, 5, 4, 7, 0.5


def test_the_overhead_is_the_injected_stage_costs_with_a_threads_wall_counted_once(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    """The truth is what the app was made to spend, not a sum of the same spans."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        loop = asyncio.get_running_loop()
        with backend.stage("auth"):
            clock.advance_ms(AUTH_MS)
        clock.advance_ms(UNSTAGED_MS)
        with backend.stage("llm_call"):
            clock.advance_ms(LLM_CALL_OWN_MS)
            await loop.run_in_executor(None, in_thread(_work(clock, THREAD_WALL_MS, THREAD_CPU_MS)))
            with backend.stage("upstream"):
                clock.advance_ms(UPSTREAM_MS)
        await _respond(send)

    _served(backend, app)
    [record] = records
    total, upstream, attributed, unattributed = reconcile(record)
    assert total == (AUTH_MS + UNSTAGED_MS + LLM_CALL_OWN_MS + THREAD_WALL_MS + UPSTREAM_MS) * MS
    assert upstream == UPSTREAM_MS * MS
    assert attributed == (AUTH_MS + LLM_CALL_OWN_MS + THREAD_WALL_MS) * MS
    assert unattributed == UNSTAGED_MS * MS
    identity_guard = attributed + unattributed == total - upstream  # true by reconcile's construction
    assert identity_guard
