"""Work a request hands to a thread pool: its CPU there, named.

LiteLLM runs part of each call in threads: the synchronous ``completion()``
that prepares an ``acompletion``, and a stream's final response. The
request's task waits meanwhile, so its steps see only waiting; the CPU is
the thread's. ``in_thread`` wraps a function a request hands to a pool: the
thread reads its own CPU clock around the call, and the event loop's thread
records the call (start, end, CPU) in the request's ``threads`` stage, of
kind ``thread``, under the stage open when it was handed over. The time
split then counts that CPU as the request's, not as waiting, in every
window the call lies in (_export/_split.py). Until the call is recorded the
request's hand-off waits for it (_after).

A call handed over after the response ended is ``after_response.threads``:
outside the request's wall time, like ``after_response``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter_ns, thread_time_ns
from typing import TYPE_CHECKING, Any

from .._wire._names import AFTER_RESPONSE_THREAD_STAGE, THREAD_STAGE
from ._after import hold, release
from ._context import open_stage, read_timeline, run_under_stage
from ._fields import GeneratorEntry
from ._guard import internal_error

if TYPE_CHECKING:
    from ._timeline import Timeline

__all__ = ["in_thread"]


def in_thread(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` timed in its thread for the current request; itself outside a request or a running loop."""
    timeline = read_timeline()
    if timeline is None:
        return function
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # handed over from another thread: no loop to record on
        return function
    try:
        stage = open_stage()
        parent: int = -1 if stage is None else stage.index
        name = AFTER_RESPONSE_THREAD_STAGE if timeline.end_ns else THREAD_STAGE
        hold(timeline)
    except Exception as exc:  # perfkit's bug must never become the app's
        internal_error("threads.hand_over", exc)
        return function

    def timed(*args: Any, **kwargs: Any) -> Any:
        start, cpu_start = perf_counter_ns(), thread_time_ns()
        try:  # stages opened in the thread nest under the one open at hand-over
            return run_under_stage(stage, function, *args, **kwargs)
        finally:
            cpu, end = thread_time_ns() - cpu_start, perf_counter_ns()
            try:
                loop.call_soon_threadsafe(_record, timeline, name, parent, start, end, cpu)
            except RuntimeError:  # the loop is closed: nobody is left to record it
                pass

    return timed


def _record(timeline: Timeline, name: str, parent: int, start: int, end: int, cpu: int) -> None:
    try:
        entry = timeline.generators.get(name)
        if entry is None:
            # Each call keeps its own parent (THREAD_CALL): calls under different
            # stages become one stage each when the record is decoded.
            calls = [start, end, cpu, parent]
            GeneratorEntry.new(
                timeline, name, "thread", first_ns=start, last_ns=end, intervals=calls, self_ns=cpu, items=1
            )
        else:
            entry[GeneratorEntry.FIRST_NS] = min(entry[GeneratorEntry.FIRST_NS], start)
            entry[GeneratorEntry.LAST_NS] = max(entry[GeneratorEntry.LAST_NS], end)
            entry[GeneratorEntry.SELF_NS] += cpu
            entry[GeneratorEntry.ITEMS] += 1
            entry[GeneratorEntry.INTERVALS] += (start, end, cpu, parent)
    except Exception as exc:
        internal_error("threads.record", exc)
    release(timeline)
