"""The request path's context variables and defaults.

A module of their own: the timeline, the stages and the C accelerator
(``_native``) all need them, and ``_timeline`` itself needs ``_native``.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._timeline import Timeline

__all__ = ["OPEN_STAGE", "TIMELINE"]

TIMELINE: ContextVar[Timeline | None] = ContextVar("perfkit_timeline", default=None)
# The stage open in this context: per task (tasks copy the context), so work a
# request spreads over several tasks (LiteLLM's during-call hook) nests right.
OPEN_STAGE: ContextVar[int] = ContextVar("perfkit_open_stage", default=-1)
