"""The event loop's CPU between steps (``PERFKIT_STEPS=cpu``, _core/_steps.py):
read from the thread's CPU clock at step boundaries, charged to the request
whose step follows as its stage ``event_loop``, on both backends and both
loops; an idle gap is charged to no one, the parsing ``protocol`` names is
not charged again, and the default mode records none."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from litellm_perfkit._core import _steps
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._export._spans import SPAN_KIND_INTERNAL, reconcile, record_to_spans
from litellm_perfkit._export._split import time_split
from litellm_perfkit._wire._names import EVENT_LOOP_STAGE, OUTSIDE_WALL_STAGES, Attr
from litellm_perfkit.types import RequestRecord, StageRecord, StepMode
from tests.core.test_after import _respond
from tests.support.asgi import discard, http_scope, one_body
from tests.support.capture import Captured
from tests.support.clock import FakeClock
from tests.support.no_collections import no_collections

MS = 1_000_000
BURNS = 4
BURN_MS = 5.0


class _Burns:
    """Loop callbacks that each burn ``BURN_MS`` of the thread's CPU; what each burned, by the thread's clock."""

    def __init__(self) -> None:
        self.burned: list[int] = []

    def __call__(self, then: Callable[[int], None] | None = None) -> None:
        start = time.thread_time_ns()
        while time.thread_time_ns() - start < BURN_MS * MS:
            pass
        self.burned.append(time.thread_time_ns() - start)
        if then is not None:
            then(self.burned[-1])


def _serve(
    backend: Backend,
    loop: asyncio.AbstractEventLoop,
    between: list[Callable[[], None]],
    steps: StepMode = "cpu",
) -> None:
    """One request whose app suspends once per callback in ``between``, each queued to run before its next step."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        running = asyncio.get_running_loop()
        for callback in between:
            running.call_soon(callback)  # queued before this task's wakeup: it runs between two steps
            await asyncio.sleep(0)
        await _respond(send)

    loop.run_until_complete(backend.middleware(app, steps=steps)(http_scope(), one_body, discard))


def _event_loop(record: RequestRecord) -> StageRecord | None:
    return next((stage for stage in record.stages if stage.name == EVENT_LOOP_STAGE), None)


def _charged_all_but_the_first(records: Captured, burns: _Burns) -> StageRecord:
    """The one request's ``event_loop`` stage, charged (within 10%) what every burn but the first burned."""
    [record] = records
    stage = _event_loop(record)
    assert stage is not None, record.stages
    charged = sum(burns.burned[1:])
    assert 0.9 * charged <= stage.self_ns <= 1.1 * charged, (stage.self_ns, burns.burned)
    return stage


def test_cpu_burned_by_a_loop_callback_between_a_requests_steps_is_its_event_loop_stage(
    backend: Backend, loop: asyncio.AbstractEventLoop, records: Captured
) -> None:
    burns = _Burns()
    _serve(backend, loop, [burns] * BURNS)
    [record] = records
    stage = _event_loop(record)
    assert stage is not None, record.stages
    burned = sum(burns.burned)
    assert len(burns.burned) == BURNS and burned >= BURNS * BURN_MS * MS
    # Ground truth: what the callbacks burned, by the same thread's clock; the
    # rest is the loop's own work between the steps (microseconds).
    assert 0.9 * burned <= stage.self_ns <= 1.1 * burned, (stage.self_ns, burned)
    assert stage.kind == "generator" and stage.parent == -1 and stage.items == BURNS
    assert stage.name in OUTSIDE_WALL_STAGES
    # All CPU, outside the request's wall time: no part of its overhead.
    split = time_split(record)
    assert split is not None
    assert split.stages[record.stages.index(stage)] == (stage.self_ns, 0, 0, 0)
    assert reconcile(record)[2] == 0  # attributed: the request has no other stage
    [span] = [s for s in record_to_spans(record, "0" * 32, "", 0) if s.name == EVENT_LOOP_STAGE]
    attributes = dict(span.attributes)
    assert span.kind == SPAN_KIND_INTERNAL and attributes[Attr.STAGE_CPU_MS] == pytest.approx(stage.self_ns / MS)


def test_a_gap_longer_than_a_second_is_an_idle_loop_charged_to_no_one(
    backend: Backend, loop: asyncio.AbstractEventLoop, records: Captured, clock: FakeClock
) -> None:
    burns = _Burns()

    def idle_then_burn() -> None:
        clock.advance_ms(_steps.LOOP_IDLE_NS / MS + 1)
        burns()

    _serve(backend, loop, [idle_then_burn, burns, burns, burns])
    assert _charged_all_but_the_first(records, burns).items == BURNS - 1


def test_the_parsing_a_stage_names_is_not_charged_again(
    backend: Backend, loop: asyncio.AbstractEventLoop, records: Captured
) -> None:
    """``protocol`` claims its calls' CPU (``claim_loop_cpu``): the gap it ran in is charged the rest only."""
    burns = _Burns()

    def parsed() -> None:
        burns(_steps.claim_loop_cpu)

    _serve(backend, loop, [parsed, burns, burns, burns])
    _charged_all_but_the_first(records, burns)


def test_a_gap_is_charged_to_the_request_whose_step_follows(
    backend: Backend, loop: asyncio.AbstractEventLoop, records: Captured
) -> None:
    """Request ``first`` queues the burn and waits; ``second``'s step is the next to run after it, and pays."""
    burns = _Burns()
    released: asyncio.Event | None = None  # made on the loop below

    async def both() -> None:
        nonlocal released
        released = asyncio.Event()

        async def first(scope: dict[str, Any], receive: Any, send: Any) -> None:
            asyncio.get_running_loop().call_soon(burns)
            assert released is not None
            await released.wait()
            await _respond(send)

        async def second(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await asyncio.sleep(0)  # the burn runs while this waits: its next step pays
            await asyncio.sleep(0)
            assert released is not None
            released.set()
            await _respond(send)

        await asyncio.gather(
            backend.middleware(first, steps="cpu")(http_scope(path="/first"), one_body, discard),
            backend.middleware(second, steps="cpu")(http_scope(path="/second"), one_body, discard),
        )

    # Without collections: one of the test process's heap between the steps is loop CPU the gap charges
    # too (6.57 ms against a 5 ms burn once, in a suite run).
    with no_collections():
        loop.run_until_complete(both())
    by_path = {record.path: _event_loop(record) for record in records}
    paid, spared = by_path["/second"], by_path["/first"]
    assert paid is not None and 0.9 * burns.burned[0] <= paid.self_ns <= 1.1 * burns.burned[0] + MS, paid
    assert spared is None or spared.self_ns < MS, spared


@pytest.mark.parametrize("steps", ["on", "off"])
def test_only_the_thread_cpu_mode_records_the_stage(
    backend: Backend, loop: asyncio.AbstractEventLoop, records: Captured, steps: StepMode
) -> None:
    _serve(backend, loop, [_Burns()] * 2, steps=steps)
    [record] = records
    assert _event_loop(record) is None


def test_the_default_mode_calls_nothing_to_charge(
    loop: asyncio.AbstractEventLoop, records: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Python step clock (the reference) charges from inside its thread-CPU branch only."""
    from tests.support import backends

    calls: list[object] = []
    monkeypatch.setattr(_steps, "_charge_gap", lambda *args: calls.append(args))
    _serve(backends.load("python"), loop, [_Burns()] * 2, steps="on")
    assert calls == [] and len(records) == 1
    _serve(backends.load("python"), loop, [_Burns()] * 2, steps="cpu")
    assert calls  # the same path in cpu mode does charge
