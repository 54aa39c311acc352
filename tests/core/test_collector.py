"""Coroutines left suspended inside a stage or a request and collected as garbage."""

from __future__ import annotations

import contextvars
import gc
import sys
import time
from typing import Any

import pytest

from litellm_perfkit._core import _sink
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._timeline import OPEN_STAGE, TIMELINE, Timeline
from tests.support import backends
from tests.support.asgi import http_scope


class Never:
    def __await__(self) -> Any:
        yield


def cyclic_garbage(coroutine: Any) -> None:
    """Start ``coroutine`` (it suspends) and leave it only in a reference cycle."""
    holder: list[Any] = [coroutine]
    coroutine.send(None)
    holder.append(holder)


# Stage.__exit__ of garbage runs inside whichever ContextVar.set started the
# collection. Without the guard this crashes CPython 3.10 and 3.11 (SIGSEGV,
# gh-148891) within its first 5 of these 2,000 rounds, on either backend.
CRASH = (
    backends.SUSPENDED_SETUP
    + """
from litellm_perfkit import stage

async def inside_stage(timeline):
    with stage("auth"):
        await Never()

gc.set_threshold(50, 1, 1)
for n in range(2000):
    suspended_garbage(inside_stage)
    for var in others:
        var.set(n)
print("survived")
"""
)


def test_sets_that_start_a_collection_of_stage_garbage_do_not_crash(backend: Backend) -> None:
    backends.assert_survives(CRASH, backend.name)


# A host's finalizer that sets a ContextVar (here, of garbage collected while
# stages open and close): a collection that starts inside the stage's own
# ContextVar.set runs it there, and CPython 3.10 and 3.11 crash (gh-148891).
# The stage sets OPEN_STAGE with the collector off: before, the C stage died
# in 5 of 5 runs of this and the Python one in 4 of 5.
FINALIZER_SETS = (
    backends.FINALIZER_SETUP
    + """
from litellm_perfkit import stage

for n in range(6000):
    if n % 500 == 0:
        gc.set_threshold((7, 50, 101, 13, 77, 29)[n // 500 % 6], 1, 1)
    for _ in range(3):
        Garbage()
    with stage("auth"):
        pass
print("survived")
"""
)


def test_a_hosts_finalizer_that_sets_a_contextvar_does_not_crash_a_stage(backend: Backend) -> None:
    backends.assert_survives(FINALIZER_SETS, backend.name)


def test_a_collected_stage_leaves_the_current_context_and_its_timeline_alone(backend: Backend) -> None:
    timeline = backend.timeline(time.perf_counter_ns(), "GET", "/")

    async def inside_stage() -> None:
        with backend.stage("auth"):
            await Never()

    def start() -> None:
        TIMELINE.set(timeline)
        cyclic_garbage(inside_stage())

    contextvars.Context().run(start)  # the stage's own context
    mine = backend.stage("mine")
    token = OPEN_STAGE.set(mine)  # the current context has a stage of its own open
    try:
        gc.collect()
        assert OPEN_STAGE.get() is mine
    finally:
        OPEN_STAGE.reset(token)
    assert timeline.finished == []  # ended by the collector: no end time worth recording


def test_a_collected_request_leaves_the_current_context_and_the_sink_alone(
    monkeypatch: pytest.MonkeyPatch, backend: Backend
) -> None:
    sunk: list[Timeline] = []
    unraisable: list[Any] = []
    _sink.set_sink(sunk.append)
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await Never()  # the server abandons the request here

    try:
        contextvars.Context().run(cyclic_garbage, backend.middleware(app)(http_scope("GET", "/"), None, None))
        mine = backend.timeline(time.perf_counter_ns(), "GET", "/mine")
        token = TIMELINE.set(mine)
        try:
            gc.collect()
            assert TIMELINE.get() is mine
        finally:
            TIMELINE.reset(token)
    finally:
        _sink.set_sink(None)
    assert unraisable == [] and sunk == []
