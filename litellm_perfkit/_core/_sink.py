"""Where finished timelines go. The core knows nothing about exporters: the
export package installs a sink here (data flows one way, recorder -> exporters)."""

from __future__ import annotations

from collections.abc import Callable

from ._timeline import Timeline

__all__ = ["Sink", "get_sink", "set_sink"]

Sink = Callable[[Timeline], None]


def _discard(timeline: Timeline) -> None:
    return None


_sink: Sink = _discard


def set_sink(sink: Sink | None) -> None:
    global _sink
    _sink = _discard if sink is None else sink


def get_sink() -> Sink:
    return _sink
