"""Step accounting: when a request's code ran, when it was ready but waited
for the event loop, and (the rest) when it waited on I/O, timers or locks.

An asyncio task runs in steps: one ``send`` into its coroutine, until the
coroutine suspends. ``StepClock`` drives the request's coroutine and records
each step as ``perf_counter_ns`` values in ``Timeline.steps``.
``start..end`` is the request's own code running (one thread runs the loop,
so a step's wall time is its CPU time unless the thread is preempted or waits
for the GIL). With ``PERFKIT_STEPS=cpu`` the thread's CPU clock is read
around each step too, and the step records its CPU: the export side
(``_export/_split.py``) counts only that as CPU, spread over the step, and
the rest of the step's wall time as waiting to run (queueing).
From when the step was ready to its start is event-loop queueing: it could
have run but others held the loop.

When a step became ready is not observable on uvloop (a future's completion
schedules the wakeup from C). What is: the start of each batch of ready
callbacks. A loop iteration runs the callbacks queued before it began, then
polls for I/O; every wakeup that poll or a timer causes runs in the next
batch. A marker callback (``_Batches.mark``) queued first in each batch while
requests are running stamps the batch's start. A step that waited on a
future therefore became ready between two bounds: ``early``, the later of its
previous step's end and the start of the batch before its own (the event may
have come in while the loop ran that batch), and ``late``, the start of its
own batch. Each step records ``early, late, start, end`` (and its CPU); the split counts
``late..start`` as queueing, ``early..late`` half as queueing and half as I/O
wait, and says how much was so estimated (docs/telemetry.md, "CPU and
waiting"). The marker stops once a batch runs no request steps, so an idle
loop still blocks in its poll, and a step after an idle loop was ready when
it started.

Tasks a request starts (``asyncio.create_task`` inside it copies its
context) are clocked too: ``TaskFactory`` wraps their coroutines,
and their steps go to the same list.

With ``PERFKIT_STEPS=cpu`` the thread's CPU clock read at each step's end
and at the next step's start (any request's, on the same loop) also gives
the event loop's own CPU between them: its I/O polling, protocol and
transport callbacks, timers, perfkit's marker, work of no request. That CPU
is charged to the request whose step follows, in its stage ``event_loop``
(a ``generator`` stage: ``self_ns`` the CPU, ``items`` the gaps charged),
less what a stage already names (the server's parsing, ``_protocol``:
``claim_loop_cpu``); a gap longer than ``LOOP_IDLE_NS`` of wall time is an
idle loop, charged to no one. Which request pays for a gap is an
approximation; the total over all requests is the loop thread's CPU
between steps (docs/telemetry.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import inspect
import os
import sys
from asyncio.events import _get_running_loop  # None outside a running loop
from collections.abc import Awaitable, Callable, Coroutine, Generator
from time import perf_counter_ns, thread_time_ns
from typing import TYPE_CHECKING, Any, Final

from .._wire._environment_variables import PERFKIT_STEPS
from .._wire._names import EVENT_LOOP_STAGE
from ..types import StepMode
from ._after import claim, hold, release
from ._collector import closed_by_collector
from ._context import TIMELINE, read_timeline
from ._fields import GeneratorEntry
from ._guard import internal_error, warn_once
from ._timeline import _PyTimelineFields

if TYPE_CHECKING:
    from ._timeline import Timeline

__all__ = [
    "LOOP_IDLE_NS",
    "MAX_STEPS",
    "PYTHON_STEPS",
    "STEP_SIZE",
    "StepAccounting",
    "StepClock",
    "StepDriver",
    "TaskFactory",
    "claim_loop_cpu",
    "loop_entry",
    "steps_mode",
]

STEP_SIZE = 5
"""Values per step in ``Timeline.steps``: early, late (the bounds of when it became ready), start, end,
and the thread's CPU in the step (-1, a small int no step allocates: not read, the step's wall time)."""
MAX_STEPS = 2048
"""Steps recorded per request; later steps are counted in ``Timeline.steps_dropped`` only."""
_STEP_VALUES = STEP_SIZE * MAX_STEPS
LOOP_IDLE_NS = 1_000_000_000
"""With ``PERFKIT_STEPS=cpu``, a gap between two steps longer than this (wall time) is an idle loop:
its CPU is charged to no request's ``event_loop`` stage."""


def steps_mode() -> StepMode:
    """``PERFKIT_STEPS``: ``on`` (default), ``cpu`` or ``off``; anything else warns and means ``on``."""
    value = os.environ.get(PERFKIT_STEPS, "on").strip().lower()
    if value in ("on", "cpu", "off"):
        return value  # type: ignore[return-value]
    warn_once("steps", "perfkit: PERFKIT_STEPS=%r is not 'on', 'cpu' or 'off'; using 'on'", value)
    return "on"


class _Batches:
    """One event loop's batch clock: when the current batch of ready callbacks began."""

    __slots__ = (
        "loop",
        "context",
        "start_ns",
        "previous_ns",
        "armed",
        "steps",
        "thread_cpu",
        "end_ns",
        "cpu_end_ns",
        "claimed_ns",
        "running",
        "queue",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # perfkit's callbacks on this loop run in this empty context: without
        # one, each call_soon copies the current context,
        # an object that lives as long as the callback waits (docs/overhead.md).
        self.context = contextvars.Context()
        self.start_ns = 0
        self.previous_ns = 0  # the batch before
        self.armed = False  # a marker is queued
        self.steps = 0  # request steps since the marker was queued
        self.thread_cpu = False  # PERFKIT_STEPS=cpu: each step's CPU from the thread's CPU clock
        # PERFKIT_STEPS=cpu: when the last step ended, by the wall clock and the thread's CPU clock (-1: none yet),
        self.end_ns = 0
        self.cpu_end_ns = -1
        # the CPU a stage named since then (the server's parsing), and the steps running now (one, or one inside another).
        self.claimed_ns = 0
        self.running = 0
        self.queue: Callable[[], object] | None = None  # instead of call_soon: marker_queue

    def arm(self, now: int) -> None:
        """A step ran while no marker was queued: a busy period begins, in a batch that started about now."""
        self.armed = True
        self.start_ns = self.previous_ns = now
        self.steps = 0
        self._queue_mark()

    def mark(self) -> None:
        if self.steps:
            self.previous_ns = self.start_ns
            self.start_ns = perf_counter_ns()
            self.steps = 0
            self._queue_mark()
        else:
            self.armed = False

    def _queue_mark(self) -> None:
        if self.queue is not None:
            self.queue()
        else:
            self.loop.call_soon(self.mark, context=self.context)


def marker_queue(loop: asyncio.AbstractEventLoop, batches: Any) -> Callable[[], object] | None:
    """On asyncio's own event loop, whose ``call_soon`` is Python: the marker's handle, made once, put
    straight on the loop's ready queue, as ``call_soon`` puts a new one (the marker is queued from the
    loop's thread, once at a time: ``armed``). That saves about 4,000 instructions a batch, two or three
    batches a request when requests come one at a time (docs/overhead.md). None on other loops (uvloop's
    ``call_soon`` is C) and in asyncio's debug mode, whose checks ``call_soon`` runs."""
    ready = getattr(loop, "_ready", None)
    if (
        not isinstance(loop, asyncio.BaseEventLoop)
        or type(loop).call_soon is not asyncio.BaseEventLoop.call_soon  # a loop of its own kind: its call_soon
        or not isinstance(ready, collections.deque)
        or loop.get_debug()
    ):
        return None
    handle = asyncio.Handle(batches.mark, (), loop, batches.context)
    return functools.partial(ready.append, handle)


FINISHED: Final = object()
"""What ``StepDriver._step`` returns when the awaitable finished (its result then in ``result``)."""


class StepDriver:
    """Drives ``awaitable`` step by step when awaited. A step is one ``send`` (or ``throw``) into it: the time
    it runs before it suspends; time spent suspended (the event loop serving others, I/O waits) is between
    steps.

    A subclass's ``_step(resume, value)`` runs one step, ``resume(value)``, counting what it counts around it,
    and returns what the awaitable suspended on, or ``FINISHED`` with its result in ``result``: the
    ``StopIteration`` stops there: letting it through one more frame cost ~1,700 instructions per awaitable
    (cachegrind, CPython 3.11), more than the step's call.
    """

    __slots__ = ("awaitable", "result")
    awaitable: Awaitable[Any]
    result: Any

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable

    def _step(self, resume: Callable[[Any], Any], value: Any) -> Any:
        raise NotImplementedError

    def __await__(self) -> Generator[Any, Any, Any]:
        iterator = self.awaitable.__await__()
        send = iterator.send
        step = self._step
        resume: Callable[[Any], Any] = send
        value: Any = None
        while True:
            suspended_on = step(resume, value)
            if suspended_on is FINISHED:
                return self.result
            try:
                value = yield suspended_on
                resume = send
            except GeneratorExit:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
                raise
            except BaseException as thrown:  # cancellation, thrown into the step
                resume, value = iterator.throw, thrown


class StepClock(StepDriver):
    """Drives one awaitable step by step, appending ``early, late, start, end, cpu`` per step to ``steps``."""

    __slots__ = ("_steps", "_batches", "_previous", "_created")

    def __init__(self, awaitable: Awaitable[Any], steps: list[int], batches: _Batches, ready_ns: int = 0) -> None:
        self.awaitable = awaitable
        self._steps = steps
        self._batches = batches
        # When the first step became ready, if known (a new task is ready when created); after it, the end of
        # the step before.
        self._previous = self._created = ready_ns

    def _step(self, resume: Callable[[Any], Any], value: Any) -> Any:
        start = perf_counter_ns()
        batches, previous = self._batches, self._previous
        if batches.armed:
            batches.steps += 1
            late = previous if previous > batches.start_ns else batches.start_ns
            early = previous if previous > batches.previous_ns else batches.previous_ns
        else:
            batches.arm(start)
            early = late = start
        if self._created:
            early = late = self._created
            self._created = 0
        if batches.thread_cpu:
            cpu = thread_time_ns()
            if not batches.running:
                _charge_gap(batches, start, cpu)
            batches.running += 1
        else:
            cpu = -1
        try:
            return resume(value)
        except StopIteration as stop:
            self.result = stop.value
            return FINISHED
        finally:
            if cpu < 0:
                end = self._previous = perf_counter_ns()
            else:
                cpu_end = thread_time_ns()
                end = self._previous = perf_counter_ns()
                cpu = cpu_end - cpu
                batches.running -= 1
                if not batches.running:
                    batches.end_ns, batches.cpu_end_ns = end, cpu_end
            steps = self._steps
            if len(steps) < _STEP_VALUES:
                steps += (early, late, start, end, cpu)
            else:
                timeline = read_timeline()
                if timeline is not None:
                    timeline.steps_dropped += 1


def _charge_gap(batches: _Batches, start: int, cpu: int) -> None:
    """The loop thread's CPU since the last step ended (``cpu``: its clock as this step starts), less what a
    stage named, into the running request's ``event_loop`` stage; nothing after an idle gap."""
    claimed, batches.claimed_ns = batches.claimed_ns, 0
    if batches.cpu_end_ns < 0 or start - batches.end_ns > LOOP_IDLE_NS:
        return
    gap = cpu - batches.cpu_end_ns - claimed
    timeline = read_timeline() if gap > 0 else None
    if timeline is None:
        return
    try:
        entry = timeline.generators.get(EVENT_LOOP_STAGE)
        if entry is None:
            entry = loop_entry(timeline, batches.end_ns)
        entry[GeneratorEntry.LAST_NS] = start
        entry[GeneratorEntry.SELF_NS] += gap
        entry[GeneratorEntry.ITEMS] += 1
    except Exception as exc:  # perfkit's bug must never become the app's
        internal_error("steps.event_loop", exc)


def loop_entry(timeline: Timeline, first_ns: int) -> list[Any]:
    """The request's new ``event_loop`` stage, its first gap starting at ``first_ns`` (C's hook too)."""
    return GeneratorEntry.new(
        timeline, EVENT_LOOP_STAGE, "generator", first_ns=first_ns, last_ns=first_ns, intervals=[]
    )


_ACCOUNTINGS: list[StepAccounting] = []
"""Every backend's step accounting (tests run both in one process)."""


def claim_loop_cpu(cpu: int) -> None:
    """``cpu`` ns of the loop thread's time between steps, on the running loop, is a stage's already (the
    server's parsing of a request, ``_protocol``): not the event loop's. With ``PERFKIT_STEPS=cpu`` only."""
    loop = _get_running_loop()
    if loop is None:
        return
    for accounting in _ACCOUNTINGS:
        batches = accounting._by_loop.get(id(loop))
        if batches is not None and batches.loop is loop:
            batches.claimed_ns += cpu


class StepAccounting:
    """One backend's step accounting: its batch clock per event loop, the clock that drives coroutines, and
    the task factory that clocks the tasks requests start.

    ``clock_class`` is ``StepClock`` here and ``_speedups.StepClock`` in C
    (``_backend.py``), with ``_Batches`` or ``_speedups.Batches`` and
    ``TaskFactory`` or ``_speedups.TaskFactory`` beside it.
    """

    __slots__ = ("clock_class", "_batches_class", "_factory_class", "_by_loop", "_last")

    def __init__(self, batches_class: type[Any], clock_class: type[Any], factory_class: type[Any]) -> None:
        self.clock_class = clock_class
        self._batches_class = batches_class
        self._factory_class = factory_class
        self._by_loop: dict[int, Any] = {}
        self._last: Any = None  # the batches clock() found last: its loop's, without an id() (an int made)
        _ACCOUNTINGS.append(self)

    def batches_for(self, loop: asyncio.AbstractEventLoop) -> Any:
        """The running loop's batch clock; the first call also clocks the tasks requests start on it
        (keeping a task factory the host set)."""
        batches = self._by_loop.get(id(loop))
        if batches is None or batches.loop is not loop:
            batches = self._by_loop[id(loop)] = self._batches_class(loop)
            batches.queue = marker_queue(loop, batches)
            loop.set_task_factory(self._factory_class(loop.get_task_factory(), batches, self.clock_class))
        return batches

    def clock(
        self, awaitable: Awaitable[Any], steps: list[int], loop: asyncio.AbstractEventLoop, thread_cpu: bool = False
    ) -> Awaitable[Any]:
        """``awaitable``, clocked step by step into ``steps`` (``thread_cpu``: and by the thread's CPU clock,
        with the tasks it starts)."""
        batches = self._last  # batches_for's common case without its call, once a request
        if batches is None or batches.loop is not loop:
            batches = self._last = self.batches_for(loop)
        batches.thread_cpu = thread_cpu
        return self.clock_class(awaitable, steps, batches)  # type: ignore[no-any-return]


async def _clocked(
    clock_class: type[Any], coroutine: Awaitable[Any], timeline: Timeline, batches: Any, created_ns: int
) -> Any:
    # A native coroutine around the clock, a task's coroutine: code that
    # inspects it (anyio reads cr_frame) finds one. The C task factory needs
    # none: its StepClock is a coroutine itself (csrc/steps.c), which also
    # releases a task cancelled before its first step (this body never runs then).
    try:
        return await clock_class(coroutine, timeline.steps, batches, created_ns)
    finally:  # after the clock recorded the last step; garbage being collected touches nothing (_collector)
        if not closed_by_collector(sys.exc_info()[0]):
            try:
                release(timeline)
            except Exception as exc:  # perfkit's bug must never become the app's
                internal_error("steps.release", exc)


def _python_fields(timeline: object) -> bool:
    """Whether ``timeline`` is the pure-Python path's (its fields in Python, not the C ``Timeline``'s)."""
    return isinstance(timeline, _PyTimelineFields)


class TaskFactory:
    """The event loop's task factory: a task started in a request's context is clocked into its steps, and
    holds its hand-off until its coroutine finishes (``_after``)."""

    __slots__ = ("_previous", "_batches", "_clock_class")

    def __init__(self, previous: Any, batches: Any, clock_class: type[Any]) -> None:
        self._previous = previous  # the factory the host had set, or None
        self._batches = batches
        self._clock_class = clock_class

    def __call__(
        self, loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Future[Any]:
        context = kwargs.get("context")
        timeline = queued_by = None
        wrapped: Coroutine[Any, Any, Any] | None = None
        try:
            queued_by = claim(coroutine)
            timeline = read_timeline() if context is None else context.get(TIMELINE)
            # The pure-Python path's requests only: where both backends run (the benchmarks), the C
            # factory, chained with this one, clocks its own.
            if timeline is not None and _python_fields(timeline) and asyncio.iscoroutine(coroutine):
                # Held before the task is made: an eager task may finish inside its making.
                hold(timeline)
                wrapped = _clocked(self._clock_class, coroutine, timeline, self._batches, perf_counter_ns())
        except Exception as exc:  # perfkit's bug must never become the app's
            internal_error("steps.task_factory", exc)
        previous = self._previous
        started = coroutine if wrapped is None else wrapped
        try:
            task = (
                previous(loop, started, **kwargs)
                if previous is not None
                else asyncio.Task(started, loop=loop, **kwargs)
            )
        except BaseException:
            if wrapped is not None and timeline is not None:  # no task will run it
                never_started = inspect.getcoroutinestate(wrapped) == inspect.CORO_CREATED
                wrapped.close()  # (one the host's factory started releases in its finally)
                if never_started:
                    release(timeline)
            raise
        if queued_by is not None:  # a task started for a coroutine the request queued takes its hold over
            try:
                release(queued_by)
            except Exception as exc:
                internal_error("steps.task_factory", exc)
        return task


PYTHON_STEPS = StepAccounting(_Batches, StepClock, TaskFactory)
