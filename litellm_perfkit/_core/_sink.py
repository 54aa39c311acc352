"""Where finished timelines go. The core knows nothing about exporters: the
export package installs a sink here (data flows one way, recorder -> exporters),
and what to run when the app shuts down: uvicorn re-raises SIGTERM after a
graceful shutdown, so ``atexit`` never runs, and the middleware calls
``at_shutdown`` when the app's lifespan has shut down (``_middleware``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._after import deferring

if TYPE_CHECKING:
    from ._timeline import Timeline

__all__ = ["Sink", "at_shutdown", "set_sink"]

Sink = Callable[["Timeline"], None]


def _discard(timeline: Timeline) -> None:
    return None


# Read as ``_sink.sink`` by the middleware: one attribute lookup per request.
sink: Sink = _discard


_on_shutdown: Callable[[], None] | None = None


def set_sink(new: Sink | None, on_shutdown: Callable[[], None] | None = None) -> None:
    """Finished requests go to ``new`` (None: nowhere), each once the tasks it started have ended (``_after``);
    ``on_shutdown`` runs when the app's lifespan has shut down."""
    global sink, _on_shutdown
    sink = _discard if new is None else deferring(new)
    _on_shutdown = on_shutdown


def at_shutdown() -> None:
    """The app has shut down: flush what the sink holds (once; a no-op without one)."""
    callback = _on_shutdown
    if callback is not None:
        callback()
