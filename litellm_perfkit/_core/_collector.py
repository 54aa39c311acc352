"""Whether the cyclic garbage collector is running.

A coroutine or async generator left suspended inside a stage (or a request)
and collected as garbage is closed by the collector: the ``GeneratorExit``
reaches ``Stage.__exit__`` and the middleware in whatever context happens to
be current, not their own. perfkit then leaves ContextVars alone and records
nothing. Setting one there would be wrong: it would change the running
request's open stage. On CPython < 3.12 it also crashes the process. A
collection can start inside the HAMT allocation of another
``ContextVar.set`` in the same context, and a set made from a finalizer
frees the HAMT that the outer set is still walking (CPython gh-148891;
tests/core/test_collector.py reproduces the segfault without this guard).
A ContextVar reset in a coroutine's ``finally`` is such a set too: perfkit's
coroutines reset theirs through ``reset_unless_collected``
(tests/litellm/test_transport.py).
"""

from __future__ import annotations

import gc
import sys
from contextvars import ContextVar, Token
from typing import Any, TypeVar

__all__ = [
    "COLLECTING",
    "closed_by_collector",
    "reset_outside_collection",
    "reset_unless_collected",
    "set_outside_collection",
    "use_speedups",
]

T = TypeVar("T")

COLLECTING = False


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    global COLLECTING
    COLLECTING = phase == "start"


def closed_by_collector(exc_type: type[BaseException] | None) -> bool:
    """True for a ``GeneratorExit`` thrown by the collector closing garbage."""
    return exc_type is GeneratorExit and COLLECTING


def reset_unless_collected(var: ContextVar[T], token: Token[T]) -> None:
    """``var.reset(token)`` in the ``finally`` of a coroutine, with the
    collector off (``reset_outside_collection``), unless the collector is
    closing it as garbage: then nothing (see above)."""
    if not closed_by_collector(sys.exc_info()[0]):
        reset_outside_collection(var, token)


def set_outside_collection(var: ContextVar[T], value: T) -> Token[T]:
    """``var.set(value)`` with the collector off: no collection starts inside
    it, so a host's finalizer that sets a ContextVar cannot run there (see
    above). perfkit sets one at every stage, which made that window common;
    a collection due then starts at the next allocation. The C Stage does the
    same (csrc/stage.c)."""
    if not gc.isenabled():
        return var.set(value)
    gc.disable()
    try:
        return var.set(value)
    finally:
        gc.enable()


def reset_outside_collection(var: ContextVar[T], token: Token[T]) -> None:
    """``var.reset(token)`` with the collector off (``set_outside_collection``)."""
    if not gc.isenabled():
        var.reset(token)
        return
    gc.disable()
    try:
        var.reset(token)
    finally:
        gc.enable()


# The reference implementations, which use_speedups leaves here (tests/core/test_collector.py compares).
PYTHON_HELPERS = (set_outside_collection, reset_outside_collection, reset_unless_collected)


def use_speedups(speedups: Any) -> None:
    """The three ContextVar helpers above answered by the C accelerator's (csrc/collector.c), for the
    callers that reach them through this module (the LiteLLM instrumentation's, per outbound wait and
    per chunk of a relayed stream)."""
    global set_outside_collection, reset_outside_collection, reset_unless_collected
    set_outside_collection = speedups.set_outside_collection
    reset_outside_collection = speedups.reset_outside_collection
    reset_unless_collected = speedups.reset_unless_collected


if _on_collection not in gc.callbacks:
    gc.callbacks.append(_on_collection)
