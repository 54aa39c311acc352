"""The request path's context variables.

A module of their own: the timeline, the stages and the C accelerator
(``_backend`` hands them over) all need them.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._stage import _PyStage
    from ._timeline import Timeline

__all__ = ["OPEN_STAGE", "PROTOCOL_WORK", "TIMELINE"]

TIMELINE: ContextVar[Timeline | None] = ContextVar("perfkit_timeline", default=None)
# The block stage open in this context: per task (tasks copy the context), so
# work a request spreads over several tasks (LiteLLM's during-call hook) nests
# right. Its ``index`` is the parent of what opens inside it.
OPEN_STAGE: ContextVar[_PyStage | None] = ContextVar("perfkit_open_stage", default=None)
# The server's protocol work for the request a protocol callback is parsing
# (_protocol): set around the callback, so the request's task, which the
# callback starts, carries it to the middleware.
PROTOCOL_WORK: ContextVar[list[Any] | None] = ContextVar("perfkit_protocol_work", default=None)
