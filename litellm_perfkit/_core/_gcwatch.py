"""Garbage-collector pauses, as the requests in flight sat through them.

A CPython collection holds the GIL from start to end, so it stops every
request of the process, whichever of them allocated the object that set it
off. ``gc.callbacks`` reports each collection's start and stop; the watch
keeps a running total of pause time. A request reads the total when it starts
and when it ends: the difference is the pause time inside its wall time.

In a LiteLLM proxy a full (generation 2) collection takes hundreds of
milliseconds (docs/litellm.md), so this is often the largest single item of a
slow request's unexplained time. Cost: two attribute reads per request, and
two short callback calls per collection (no object is kept).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

__all__ = ["GcWatch", "WATCH", "install"]


class GcWatch:
    """Running totals of this process's collector pauses (monotonic ns)."""

    __slots__ = ("total_ns", "collections", "_clock", "_started")

    def __init__(self, clock: Callable[[], int] = perf_counter_ns) -> None:
        self.total_ns = 0
        self.collections = 0
        self._clock = clock
        self._started = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        # A gc callback must not raise (it would be printed at every
        # collection): integer arithmetic only. Collections never nest.
        if phase == "start":
            self._started = self._clock()
        elif self._started:
            self.total_ns += self._clock() - self._started
            self.collections += 1
            self._started = 0


WATCH = GcWatch()


def install() -> None:
    """Start watching (idempotent; the middleware calls it), unless
    ``PERFKIT_LEAVE_OUT`` names ``gcwatch``: requests then report no pauses."""
    from ._leave_out import leave_out

    if WATCH not in gc.callbacks and "gcwatch" not in leave_out():
        gc.callbacks.append(WATCH)
