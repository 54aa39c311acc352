"""Work a request starts that outlives its response: LiteLLM's logging and
success callbacks, which run after the response in tasks the request started.

The task factory clocks every task started in a request's context into the
request's steps (``_steps``); steps recorded after the request was handed to
the exporter would go nowhere, so each clocked task holds its request until
it ends: a request whose tasks are still running is
handed off when the last one ends, or ``WAIT_S`` after its response,
whichever comes first, with one more stage, ``after_response``, from the
response's end to then (its CPU, queueing and I/O from the steps that ran
in it). Work queued for a worker task to start later (LiteLLM's logging
queue) holds the request from when it is queued: ``expect``, called by the
LiteLLM instrumentation; the task started for that coroutine takes the hold
over.

``after_response`` lies outside the request's wall time: it is not part of
its duration, overhead or unattributed time (_export/_spans.reconcile), only
of the CPU perfkit names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from .._wire._names import AFTER_RESPONSE_STAGE, AFTER_RESPONSE_THREAD_STAGE
from ._fields import GENERATOR, THREAD_CALL
from ._guard import internal_error

if TYPE_CHECKING:
    from ._sink import Sink
    from ._timeline import Timeline

__all__ = ["WAIT_S", "claim", "deferring", "expect", "hold", "release"]

WAIT_S = 2.0
"""The longest a request's hand-off waits for its tasks after the response.
A task that runs for longer (a worker loop started by the first request)
then adds nothing more to it."""


class _Held:
    __slots__ = ("timeline", "count", "ended", "steps_at_end", "deadline", "expected")

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.count = 0  # tasks (and queued coroutines) not yet ended
        self.ended = False  # the response has ended: hand off when count is 0
        self.steps_at_end = 0
        self.deadline: asyncio.TimerHandle | None = None
        self.expected: list[int] = []  # ids of its coroutines still queued


_INTERVALS = GENERATOR.index("intervals")
_CALL_PARENT = THREAD_CALL.index("parent")

_held: dict[int, _Held] = {}
# id(coroutine) -> (the coroutine, the request that queued it); the C task
# factory holds this very dict (setup() in _backend), so it is never rebound.
_expected: dict[int, tuple[Coroutine[Any, Any, Any], Timeline]] = {}
_exporter: Sink | None = None


def hold(timeline: Timeline) -> None:
    """A task of this request started: its hand-off waits for ``release``."""
    held = _held.get(id(timeline))
    if held is None or held.timeline is not timeline:
        held = _held[id(timeline)] = _Held(timeline)
    held.count += 1


def release(timeline: Timeline) -> None:
    """A task of this request ended."""
    held = _held.get(id(timeline))
    if held is None or held.timeline is not timeline:
        return  # handed off at its deadline already
    held.count -= 1
    if held.count <= 0:
        if held.ended:
            _finish(held)
        else:  # nothing to wait for (again): a request never handed off (abandoned) leaves nothing behind
            del _held[id(timeline)]


def release_task(timeline: Timeline) -> Any:
    """A done callback for a task: ``release(timeline)`` when it ends."""

    def done(task: asyncio.Future[Any]) -> None:
        try:
            release(timeline)
        except Exception as exc:  # perfkit's bug must never become the app's
            internal_error("after.release", exc)

    return done


def expect(timeline: Timeline, coroutine: Coroutine[Any, Any, Any]) -> None:
    """The request queued ``coroutine`` for another task to run: it holds the request until its task starts."""
    hold(timeline)
    _expected[id(coroutine)] = (coroutine, timeline)
    _held[id(timeline)].expected.append(id(coroutine))


def claim(coroutine: object) -> Timeline | None:
    """A task starts for ``coroutine``: the request that queued it, whose hold the task now takes over, if any."""
    if not _expected:
        return None
    entry = _expected.get(id(coroutine))
    if entry is None or entry[0] is not coroutine:
        return None
    del _expected[id(coroutine)]
    return entry[1]


def deferring(exporter: Sink) -> Sink:
    """The sink the middleware hands finished requests to: ``exporter``, once their tasks have ended."""
    global _exporter
    _exporter = exporter

    def hand_off(timeline: Timeline) -> None:
        held = _held.get(id(timeline)) if _held else None
        if held is None or held.timeline is not timeline:  # (release drops a request once nothing holds it)
            exporter(timeline)
            return
        held.ended = True
        held.steps_at_end = len(timeline.steps)
        try:
            held.deadline = asyncio.get_running_loop().call_later(WAIT_S, _expire, held)
        except RuntimeError:  # no loop: nothing can end later
            _finish(held)

    return hand_off


def _expire(held: _Held) -> None:
    if _held.get(id(held.timeline)) is held:
        _finish(held)


def _finish(held: _Held) -> None:
    timeline = held.timeline
    del _held[id(timeline)]
    for key in held.expected:
        entry = _expected.get(key)
        if entry is not None and entry[1] is timeline:
            del _expected[key]
    if held.deadline is not None:
        held.deadline.cancel()
    try:
        threads = timeline.generators.get(AFTER_RESPONSE_THREAD_STAGE)
        if len(timeline.steps) > held.steps_at_end or threads is not None:
            index = timeline.next_index
            timeline.finished.append((index, AFTER_RESPONSE_STAGE, timeline.end_ns, perf_counter_ns(), -1))
            timeline.next_index += 1
            if threads is not None:  # its calls ran inside this stage: its children
                calls, size = threads[_INTERVALS], len(THREAD_CALL)
                calls[_CALL_PARENT::size] = [index] * (len(calls) // size)
    except Exception as exc:
        internal_error("after.finish", exc)
    if _exporter is not None:
        try:
            _exporter(timeline)
        except Exception as exc:  # from a done callback or a timer: nobody else would catch it
            internal_error("after.hand_off", exc)
