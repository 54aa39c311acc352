"""The C accelerator of the request path, when it is built and not turned off.

``_speedups`` (sources in ``csrc/``) holds the timeline's fields and
implements ``Stage``'s enter and exit, the middleware's ``send`` and
``finish`` and the hand-off of finished timelines to the export agent: the
code that runs for every stage, every body message and every request. The
pure-Python classes in ``_timeline.py``, ``_stage.py`` and ``_middleware.py``
are the reference it is tested against, and the fallback when no C compiler
was available at install time or when ``PERFKIT_SPEEDUPS=off``.
docs/overhead.md has what each path costs.
"""

from __future__ import annotations

import os
from time import perf_counter_ns
from types import ModuleType
from typing import TypeVar, cast

from ..types import SpeedupsMode
from . import _sink
from ._collector import closed_by_collector
from ..types import RequestRecord
from ._context import OPEN_STAGE, TIMELINE
from ._fields import layout
from ._gcwatch import WATCH
from ._guard import internal_error, warn_once
from .._wire._events import CHAT_OUTPUT_KEYS, TOKEN_HINTS, data_has_token
from .._wire._headers import ENTRY_PREFIXES, entry_prefix

__all__ = ["core", "native", "speedups_mode"]

MODES: tuple[SpeedupsMode, ...] = ("on", "off")
T = TypeVar("T")


def speedups_mode() -> SpeedupsMode:
    """``PERFKIT_SPEEDUPS``: ``on`` (default) or ``off``; anything else warns and means ``on``."""
    value = os.environ.get("PERFKIT_SPEEDUPS", "on").strip().lower()
    for mode in MODES:
        if value == mode:
            return mode
    warn_once("speedups", "perfkit: PERFKIT_SPEEDUPS=%r is not 'on' or 'off'; using 'on'", value)
    return "on"


def _load() -> ModuleType | None:
    if speedups_mode() == "off":
        return None
    try:
        from . import _speedups  # type: ignore[attr-defined]
    except ImportError:  # built without a C compiler: the Python path
        return None
    _speedups.setup(
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
        timeline_defaults=tuple((f.factory, f.default) for f in layout(RequestRecord).fields if f.kind == "object"),
    )
    module: ModuleType = _speedups
    return module


native = _load()


def core(reference: type[T], name: str) -> type[T]:
    """The accelerator's class ``name`` when it runs, else ``reference``: the
    Python class it implements. The public classes subclass what this gives."""
    return reference if native is None else cast("type[T]", getattr(native, name))
