"""The request path's two implementations, and which one runs.

The request path (a timeline's fields, ``Stage``'s enter and exit, the
middleware's ``send`` and ``finish``, the hand-off to the export agent)
exists twice: in C (``_speedups``, sources in ``csrc/``), and in pure Python
(``_PyTimelineFields``, ``_PyStage``, ``_PyExchange``), which is the reference
the C code is tested against and the fallback when no C compiler was there
at install time or ``PERFKIT_SPEEDUPS=off``. This module is the one place
that chooses: ``ACTIVE`` is the backend in use, and ``backend(name)`` builds
either one, so tests run both in one process. docs/overhead.md has what each
path costs.
"""

from __future__ import annotations

import asyncio
import collections.abc
import os
from dataclasses import dataclass
from time import perf_counter_ns
from types import ModuleType
from typing import Any, Literal

from .._wire._environment_variables import PERFKIT_SPEEDUPS
from .._wire._events import CHAT_OUTPUT_KEYS, TOKEN_HINTS, data_has_token
from .._wire._headers import ENTRY_PREFIXES, entry_prefix
from .._wire._names import EVENT_LOOP_STAGE
from ..types import RequestRecord, SpeedupsMode
from . import _after, _collector, _sink, _stage
from ._collector import closed_by_collector
from ._context import OPEN_STAGE, TIMELINE, use_speedups
from ._fields import layout
from ._gcwatch import WATCH
from ._guard import internal_error, warn_once
from ._hosttrace import HOST_TRACING
from ._layouts import Span
from ._middleware import PerfkitMiddleware, _PyExchange
from ._sampling import scan_headers
from ._stage import Stage, _PyStage
from ._steps import LOOP_IDLE_NS, MAX_STEPS, PYTHON_STEPS, STEP_SIZE, StepAccounting, loop_entry
from ._timeline import Timeline, _PyTimelineFields
from ._traffic import INCOMPLETE_RESPONSE, KNOWN_METHODS, MAX_SERIES, OTHER, UNMATCHED_ROUTE, Tally, _PyTally

__all__ = ["ACTIVE", "Backend", "BackendName", "backend", "speedups_mode"]

BackendName = Literal["c", "python"]
MODES: tuple[SpeedupsMode, ...] = ("on", "off")


def speedups_mode() -> SpeedupsMode:
    """``PERFKIT_SPEEDUPS``: ``on`` (default) or ``off``; anything else warns and means ``on``."""
    value = os.environ.get(PERFKIT_SPEEDUPS, "on").strip().lower()
    for mode in MODES:
        if value == mode:
            return mode
    warn_once("speedups", "perfkit: PERFKIT_SPEEDUPS=%r is not 'on' or 'off'; using 'on'", value)
    return "on"


_speedups: ModuleType | None = None


def _load_speedups() -> ModuleType | None:
    """The C module, set up once with everything it needs from Python; None when not built."""
    global _speedups
    if _speedups is not None:
        return _speedups
    try:
        from . import _speedups as module
    except ImportError:  # built without a C compiler
        return None
    module.setup(
        timeline_var=TIMELINE,
        open_stage_var=OPEN_STAGE,
        internal_error=internal_error,
        closed_by_collector=closed_by_collector,
        gc_watch=WATCH,
        entry_prefixes=ENTRY_PREFIXES,
        entry_prefix=entry_prefix,
        data_has_token=data_has_token,
        token_hints=TOKEN_HINTS,
        chat_output_keys=CHAT_OUTPUT_KEYS,
        sink_module=_sink,
        default_clock=perf_counter_ns,
        timeline_defaults=tuple(
            (f.factory, f.default if f.c_list == "list" else getattr(module, f.c_list))
            for f in layout(RequestRecord).fields
            if f.kind == "object"
        ),
        host_stage_enter=HOST_TRACING.enter_stage,
        host_stage_exit=HOST_TRACING.exit_stage,
        step_values=STEP_SIZE * MAX_STEPS,
        event_loop_stage=EVENT_LOOP_STAGE,
        loop_idle_ns=LOOP_IDLE_NS,
        loop_entry=loop_entry,
        task_type=asyncio.Task,
        iscoroutine=asyncio.iscoroutine,
        expected=_after._expected,
        tasks_ended=_after.tasks_ended,
        span_type=Span,
    )
    # A StepClock (the C task factory makes it a task's coroutine, no native
    # coroutine around it) and a StagedCall (an async stage's call) may go to
    # asyncio.Task, which takes a registered Coroutine.
    for coroutine in (module.StepClock, module.StagedCall):
        collections.abc.Coroutine.register(coroutine)
    use_speedups(module)
    _collector.use_speedups(module)
    _stage.use_speedups(module)
    _speedups = module
    return _speedups


@dataclass(frozen=True)
class Backend:
    """One implementation's classes, put together."""

    name: BackendName
    timeline: type[Timeline]
    stage: type[Stage]  # what ``litellm_perfkit.stage`` is
    middleware: type[PerfkitMiddleware]  # what ``litellm_perfkit.PerfkitMiddleware`` is
    handoff: Any  # the C hand-off type, or None: the export queue is Python's
    tally: Tally  # every request this backend's middleware served (_traffic)
    speedups: ModuleType | None


def _assemble(name: BackendName, speedups: ModuleType | None) -> Backend:
    fields = _PyTimelineFields if speedups is None else speedups.Timeline
    stage_core = _PyStage if speedups is None else speedups.Stage
    exchange_core = _PyExchange if speedups is None else speedups.Exchange
    steps = (
        PYTHON_STEPS if speedups is None else StepAccounting(speedups.Batches, speedups.StepClock, speedups.TaskFactory)
    )
    timeline = type("Timeline", (Timeline, fields), {"__slots__": (), "__module__": Timeline.__module__})
    stage_namespace = {"__slots__": (), "__module__": Stage.__module__, "__doc__": Stage.__doc__}
    if speedups is not None:
        stage_namespace["_staged"] = speedups.StagedFunction
    stage = type("Stage", (Stage, stage_core), stage_namespace)
    tally: Tally = (
        _PyTally()
        if speedups is None
        else speedups.Tally(KNOWN_METHODS, OTHER, UNMATCHED_ROUTE, INCOMPLETE_RESPONSE, MAX_SERIES)
    )
    # receive is a coroutine: Python's in both (one in C measured no faster:
    # the server's own coroutine is most of its cost).
    exchange = type("_Exchange", (exchange_core,), {"__slots__": (), "receive": _PyExchange.receive})
    if speedups is not None:  # a request's objects of these classes from their C type's free list, as its others
        for cls in (timeline, stage, exchange):
            speedups.share_free_list(cls)
    middleware = type(
        "PerfkitMiddleware",
        (PerfkitMiddleware,),
        {
            "__module__": PerfkitMiddleware.__module__,
            "__doc__": PerfkitMiddleware.__doc__,
            "_timeline_class": timeline,
            "_exchange_class": exchange,
            "_step_accounting": steps,
            "_scan_headers": staticmethod(scan_headers if speedups is None else speedups.scan_headers),
            "_tally": tally,
        },
    )
    return Backend(name, timeline, stage, middleware, None if speedups is None else speedups.Handoff, tally, speedups)


_built: dict[BackendName, Backend] = {}


def backend(name: BackendName) -> Backend:
    """The backend ``name``; ``c`` raises ImportError when the accelerator is not built."""
    found = _built.get(name)
    if found is None:
        speedups = None
        if name == "c":
            speedups = _load_speedups()
            if speedups is None:
                raise ImportError("litellm_perfkit._core._speedups is not built (no C compiler at install time)")
        found = _built[name] = _assemble(name, speedups)
    return found


def _choose() -> Backend:
    if speedups_mode() == "on":
        try:
            return backend("c")
        except ImportError:
            pass
    return backend("python")


ACTIVE = _choose()
