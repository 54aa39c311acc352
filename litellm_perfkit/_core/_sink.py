"""Where finished timelines go. The core knows nothing about exporters: the
export package installs a sink here (data flows one way, recorder -> exporters)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._after import deferring

if TYPE_CHECKING:
    from ._timeline import Timeline

__all__ = ["Sink", "set_sink"]

Sink = Callable[["Timeline"], None]


def _discard(timeline: Timeline) -> None:
    return None


# Read as ``_sink.sink`` by the middleware: one attribute lookup per request.
sink: Sink = _discard


def set_sink(new: Sink | None) -> None:
    """Finished requests go to ``new`` (None: nowhere), each once the tasks it started have ended (``_after``)."""
    global sink
    sink = _discard if new is None else deferring(new)
