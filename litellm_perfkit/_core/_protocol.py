"""The server's protocol work for a request: parsing its bytes on the event
loop's thread, outside the request's steps.

An ASGI server parses a request in a protocol callback (uvicorn's
``data_received``) and starts the request's task from inside it, before the
app, and so the middleware, sees the request; the reads of a long body run in
the same callback later, while the request waits for them. ``parsing`` times
each call and folds it into the stage ``protocol`` of the request it parsed,
of kind ``thread`` (calls with start, end and CPU: on the loop's thread a
callback's wall time is its CPU, as a step's is; with ``PERFKIT_STEPS=cpu``
the thread's CPU clock is read around the call instead). The stage is made before
the call and set in the context, which the request's task copies when the
callback starts it; the middleware takes it over when the request reaches
it (``adopt``).

With ``PERFKIT_STEPS=cpu`` the call's CPU is claimed from the event loop's
CPU between steps (``_steps.claim_loop_cpu``), so that ``event_loop`` does not
count it again.

The stage lies outside the request's wall time, as ``after_response`` does:
no part of its duration, overhead or unattributed time, only of the CPU
perfkit names. A call while the request ran is, for the request's own split,
the request waiting for its body; that call's CPU is counted once, here.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns, thread_time_ns
from typing import TYPE_CHECKING, Any

from .._wire._names import PROTOCOL_STAGE
from ._context import PROTOCOL_WORK, read_protocol_work
from ._fields import GeneratorEntry
from ._guard import internal_error
from ._steps import claim_loop_cpu, steps_mode

if TYPE_CHECKING:
    from ._timeline import Timeline

__all__ = ["adopt", "parsing"]

# On the protocol object: (the request it is parsing, that request's stage).
_HELD = "_perfkit_protocol_work"

RequestOf = Callable[[Any], object]
"""The request a protocol object is parsing: None when it has none, or that request's response is complete."""


# A call's work, a thread stage's entry, until the middleware gives it an index.
_UNINDEXED_WORK = GeneratorEntry.new(None, PROTOCOL_STAGE, "thread", first_ns=0, last_ns=0, intervals=[])


def parsing(function: Callable[[Any, Any], Any], request_of: RequestOf) -> Callable[[Any, Any], Any]:
    """``function``, a protocol's data callback, timed into the ``protocol`` stage of the request it parses."""
    thread_cpu = steps_mode() == "cpu"

    def data_received(protocol: Any, data: Any) -> Any:
        work = _UNINDEXED_WORK.copy()  # a copy costs less than GeneratorEntry.new's keyword call
        work[GeneratorEntry.INTERVALS] = []
        try:
            before = request_of(protocol)
            token = PROTOCOL_WORK.set(work)
        except Exception as exc:  # perfkit's bug must never become the server's
            internal_error("protocol.before", exc)
            return function(protocol, data)
        start = perf_counter_ns()
        cpu = thread_time_ns() if thread_cpu else 0
        try:
            return function(protocol, data)
        finally:
            cpu = thread_time_ns() - cpu if thread_cpu else 0
            end = perf_counter_ns()
            PROTOCOL_WORK.reset(token)
            try:
                cpu = min(cpu, end - start) if thread_cpu else end - start
                if _fold(protocol, request_of(protocol), before, work, start, end, cpu) and thread_cpu:
                    claim_loop_cpu(cpu)  # named here: not the event loop's CPU between steps (_steps)
            except Exception as exc:
                internal_error("protocol.fold", exc)

    return data_received


def _fold(protocol: Any, request: object, before: object, work: list[Any], start: int, end: int, cpu: int) -> bool:
    """Whether the call went into a request's stage."""
    if request is None:
        return False  # between requests: bytes of the next one's head, nobody's yet
    if request is not before:  # this call began the request: its task carries ``work``
        setattr(protocol, _HELD, (request, work))
    else:  # more of a request begun earlier (its body)
        held = getattr(protocol, _HELD, None)
        if held is None or held[0] is not request:
            return False
        work = held[1]
    if not work[GeneratorEntry.ITEMS]:
        work[GeneratorEntry.FIRST_NS] = start
    work[GeneratorEntry.LAST_NS] = end
    work[GeneratorEntry.SELF_NS] += cpu
    work[GeneratorEntry.ITEMS] += 1
    work[GeneratorEntry.INTERVALS] += (start, end, cpu, -1)
    return True


def adopt(timeline: Timeline) -> None:
    """The protocol work of the request this task serves becomes its stage ``protocol`` (the middleware, at the request's start)."""
    work = read_protocol_work()
    if work is None or work[GeneratorEntry.INDEX] >= 0 or not work[GeneratorEntry.ITEMS]:
        return  # no protocol callback is timed, or a request served twice (an app calling itself)
    try:
        work[GeneratorEntry.INDEX] = timeline.next_index
        timeline.next_index += 1
        timeline.generators[PROTOCOL_STAGE] = work
    except Exception as exc:
        internal_error("protocol.adopt", exc)
