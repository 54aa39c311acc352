"""Work a request starts that outlives its response: LiteLLM's logging and
success callbacks, which run after the response in tasks the request started.

The task factory clocks every task started in a request's context into the
request's steps (``_steps``); steps recorded after the request was handed to
the exporter would go nowhere, so each clocked task holds its request from
before the task is made until its coroutine finishes (returns, raises or is
closed), which releases it after its last step is recorded. A request whose
tasks are still running when it ends is handed off when the last one ends,
or ``WAIT_S`` after its response, whichever comes first, with one more
stage, ``after_response``, from the response's end to then (its CPU,
queueing and I/O from the steps that ran in it). Work queued for a worker
task to start later (LiteLLM's logging queue) holds the request from when
it is queued: ``expect``, called by the LiteLLM instrumentation; the task
started for that coroutine takes the hold over.

The hold is a count in the timeline (``held_tasks``): a task allocates
nothing for it and queues nothing on the loop as it ends. Only a request
handed off while held gets a record (``_Held``) and, per loop, one sweep
that hands off whatever is past its deadline. Under load most requests are
held for a while, and whatever they hold lives through the host's young
collections into its oldest generation, bringing the host's next full
collection nearer (docs/overhead.md). A task that never finishes (or, on the
pure-Python path, is cancelled before its first step, which its native
coroutine wrapper never sees) holds its request until the deadline.

``after_response`` lies outside the request's wall time: it is not part of
its duration, overhead or unattributed time (_export/_spans.reconcile), only
of the CPU perfkit names.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from time import perf_counter_ns
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from .._wire._names import AFTER_RESPONSE_STAGE, AFTER_RESPONSE_THREAD_STAGE
from . import _collector
from ._fields import THREAD_CALL, GeneratorEntry
from ._guard import internal_error

if TYPE_CHECKING:
    from ._sink import Sink
    from ._timeline import Timeline

__all__ = ["WAIT_S", "claim", "deferring", "expect", "hold", "release", "tasks_ended"]

WAIT_S = 2.0
"""The longest a request's hand-off waits for its tasks after the response.
A task that runs for longer (a worker loop started by the first request)
then adds nothing more to it."""


class _Held:
    """A request handed off while some of its tasks still run (``Timeline.waiting``)."""

    __slots__ = ("timeline", "steps_at_end", "loop", "deadline")

    def __init__(self, timeline: Timeline, loop: asyncio.AbstractEventLoop | None) -> None:
        self.timeline = timeline
        self.steps_at_end = len(timeline.steps)
        self.loop = loop  # the loop it ended on, and its time then plus WAIT_S
        self.deadline = 0.0 if loop is None else loop.time() + WAIT_S


_CALL_PARENT = THREAD_CALL.index("parent")

# The request, from its hand-off while held until its last task ends or its deadline. Keyed by the
# timeline itself, which hashes by identity: an id() would be a new int per request.
_held: dict[Timeline, _Held] = {}
# A native coroutine queued for another task -> the request that queued it. Keyed by the coroutine, which
# hashes by identity (an id() would be a new int per queued coroutine); the C task factory holds this very
# dict (setup() in _backend), so it is never rebound.
_expected: dict[Coroutine[Any, Any, Any], Timeline] = {}
_exporter: Sink | None = None
# id(loop) -> the loop, while a sweep is queued on it (the entry keeps the id from being reused)
_sweeps: dict[int, asyncio.AbstractEventLoop] = {}


def hold(timeline: Timeline) -> None:
    """A task of this request is about to start: its hand-off waits for ``release``. A count in the
    timeline (the C task factory and clock keep it themselves, csrc/steps.c): nothing is allocated."""
    timeline.held_tasks += 1


def release(timeline: Timeline) -> None:
    """A task of this request ended."""
    timeline.held_tasks -= 1
    if timeline.held_tasks <= 0:
        timeline.held_tasks = 0
        if timeline.waiting:
            tasks_ended(timeline)


def tasks_ended(timeline: Timeline) -> None:
    """The last task of a request handed off while held ended: it goes to the exporter now. Not from
    inside a collection (a clock freed as garbage): that touches nothing, and the sweep hands it off."""
    if _collector.COLLECTING:
        return
    held = _held.get(timeline)
    if held is not None:  # (else handed off at its deadline already)
        _finish(held)


def expect(timeline: Timeline, coroutine: Coroutine[Any, Any, Any]) -> None:
    """The request queued ``coroutine`` for another task to run: it holds the request until its task starts.
    Only a native coroutine (an awaitable of another type may hash and compare by its own code)."""
    if type(coroutine) is CoroutineType:
        hold(timeline)
        _expected[coroutine] = timeline


def claim(coroutine: object) -> Timeline | None:
    """A task starts for ``coroutine``: the request that queued it, whose hold the task now takes over, if any.
    The C task factory does the same in C (csrc/tasks.c)."""
    if not _expected or type(coroutine) is not CoroutineType:
        return None
    return _expected.pop(coroutine, None)


def deferring(exporter: Sink) -> Sink:
    """The sink the middleware hands finished requests to: ``exporter``, once their tasks have ended."""
    global _exporter
    _exporter = exporter

    def hand_off(timeline: Timeline) -> None:
        if timeline.held_tasks <= 0:
            exporter(timeline)
            return
        timeline.waiting = True
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no loop: nothing can end later
            loop = None
        held = _held[timeline] = _Held(timeline, loop)
        if loop is None:
            _finish(held)
            return
        _sweep_at(loop, held.deadline)

    return hand_off


def _sweep_at(loop: asyncio.AbstractEventLoop, when: float) -> None:
    """A sweep on ``loop`` at ``when``, unless one is queued: deadlines come in the order requests end, so
    a queued sweep is due first and queues the next."""
    if _sweeps.get(id(loop)) is loop:
        return
    for key in [key for key, other in _sweeps.items() if other.is_closed()]:
        # Closed with its sweep queued: nothing will run it. Its requests go
        # now, with what they have; their tasks will never end.
        for held in _held_on(_sweeps.pop(key)):
            _finish(held)
    _sweeps[id(loop)] = loop
    # An empty context: a copy of the current one would keep its request alive until then.
    loop.call_at(when, _sweep, loop, context=contextvars.Context())


def _sweep(loop: asyncio.AbstractEventLoop) -> None:
    """Hands off this loop's requests past their deadline, and queues the next sweep for the rest."""
    _sweeps.pop(id(loop), None)
    now, due = loop.time(), None
    try:
        for held in _held_on(loop):
            if held.deadline <= now:
                _finish(held)
            elif due is None or held.deadline < due:
                due = held.deadline
        if due is not None:
            _sweep_at(loop, due)
    except Exception as exc:  # from a timer: nobody else would catch it
        internal_error("after.sweep", exc)


def _held_on(loop: asyncio.AbstractEventLoop) -> list[_Held]:
    """The requests that ended on ``loop`` and are still held (a copy: handing off removes them)."""
    return [held for held in _held.values() if held.loop is loop]


def _finish(held: _Held) -> None:
    timeline = held.timeline
    del _held[timeline]
    timeline.waiting = False
    if _expected and timeline.held_tasks:  # its coroutines still queued (each holds it) are no longer waited for
        for coroutine in [coroutine for coroutine, queued_by in _expected.items() if queued_by is timeline]:
            del _expected[coroutine]
    try:
        threads = timeline.generators.get(AFTER_RESPONSE_THREAD_STAGE)
        if len(timeline.steps) > held.steps_at_end or threads is not None:
            index = timeline.next_index
            # From the app's return: its time after its last byte is the request's own part before this.
            returned = timeline.end_ns + timeline.after_last_byte_ns
            timeline.finished.append((index, AFTER_RESPONSE_STAGE, returned, perf_counter_ns(), -1))
            timeline.next_index += 1
            if threads is not None:  # its calls ran inside this stage: its children
                calls, size = threads[GeneratorEntry.INTERVALS], len(THREAD_CALL)
                calls[_CALL_PARENT::size] = [index] * (len(calls) // size)
    except Exception as exc:
        internal_error("after.finish", exc)
    if _exporter is not None:
        try:
            _exporter(timeline)
        except Exception as exc:  # from a task's last step or a timer: nobody else would catch it
            internal_error("after.hand_off", exc)
