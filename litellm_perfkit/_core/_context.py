"""The request path's context variables.

A module of their own: the timeline, the stages and the C accelerator
(``_backend`` hands them over) all need them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._stage import _PyStage
    from ._timeline import Timeline

__all__ = [
    "OPEN_STAGE",
    "PROTOCOL_WORK",
    "TIMELINE",
    "open_stage",
    "read_protocol_work",
    "read_timeline",
    "reset_timeline",
    "run_under_stage",
    "set_timeline",
    "use_speedups",
]

TIMELINE: ContextVar[Timeline | None] = ContextVar("perfkit_timeline", default=None)
# The block stage open in this context: per task (tasks copy the context), so
# work a request spreads over several tasks (LiteLLM's during-call hook) nests
# right. Its ``index`` is the parent of what opens inside it.
# The C accelerator keeps it on the task's StepClock instead, while the clock
# runs the task's step (steps.c says why): read it with ``open_stage()``.
OPEN_STAGE: ContextVar[_PyStage | None] = ContextVar("perfkit_open_stage", default=None)
# The server's protocol work for the request a protocol callback is parsing
# (_protocol): set around the callback, so the request's task, which the
# callback starts, carries it to the middleware.
PROTOCOL_WORK: ContextVar[list[Any] | None] = ContextVar("perfkit_protocol_work", default=None)

# Their methods bound once, for the request path: CPython binds a
# ContextVar's method at each lookup (its type is not one whose method calls
# skip the binding), a collector-tracked object made and freed per call.
read_timeline: Callable[[], Timeline | None] = TIMELINE.get
set_timeline: Callable[[Timeline | None], Token[Timeline | None]] = TIMELINE.set
reset_timeline: Callable[[Token[Timeline | None]], None] = TIMELINE.reset
read_protocol_work: Callable[[], list[Any] | None] = PROTOCOL_WORK.get
_read_open_stage: Callable[[], _PyStage | None] = OPEN_STAGE.get


def _call(stage: _PyStage | None, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)


_run_under_stage: Callable[..., Any] = _call


def open_stage() -> _PyStage | None:
    """The innermost block stage open in the running task (in a signal handler
    too), or None. Generator and sum stages are not "open": they are folded in
    as they run."""
    return _read_open_stage()


def run_under_stage(stage: _PyStage | None, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` in a thread, with ``stage`` (open at hand-over) its open stage. A C
    stage needs it: the thread's context may be a copy made inside a clocked step. A Python stage's
    context holds it already."""
    return _run_under_stage(stage, function, *args, **kwargs)


def use_speedups(speedups: Any) -> None:
    """``open_stage`` and ``run_under_stage`` answered by the C accelerator's, which fall back to
    ``OPEN_STAGE`` outside its clocks and for Python stages."""
    global _read_open_stage, _run_under_stage
    _read_open_stage, _run_under_stage = speedups.open_stage, speedups.run_under_stage
