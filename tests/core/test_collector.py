"""Coroutines left suspended inside a stage or a request and collected as garbage."""

from __future__ import annotations

import contextvars
import gc
import sys
import time
from typing import Any

import pytest

from litellm_perfkit._core import _collector, _sink
from litellm_perfkit._core._backend import Backend, BackendName
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


def _helpers(name: BackendName) -> tuple[Any, Any, Any]:
    if name == "python":
        return _collector.PYTHON_HELPERS
    native = backends.load("c").speedups
    assert native is not None
    return native.set_outside_collection, native.reset_outside_collection, native.reset_unless_collected


@pytest.mark.parametrize("name", ["python", "c"])
def test_the_contextvar_helpers_set_and_reset_with_the_collector_off_then_as_it_was(name: BackendName) -> None:
    set_var, reset_var, reset_unless = _helpers(name)
    var: contextvars.ContextVar[int] = contextvars.ContextVar("helped", default=0)
    assert gc.isenabled()
    token = set_var(var, 1)
    assert var.get() == 1 and gc.isenabled()
    reset_var(var, token)
    assert var.get() == 0 and gc.isenabled()
    gc.disable()
    try:
        reset_unless(var, set_var(var, 2))
        assert var.get() == 0 and not gc.isenabled()  # off stays off
    finally:
        gc.enable()
    with pytest.raises((TypeError, AttributeError)):  # C's checks the type; Python's finds no .set
        set_var("not a ContextVar", 1)


@pytest.mark.parametrize("name", ["python", "c"])
@pytest.mark.parametrize("collecting", [False, True])
def test_a_reset_in_a_finally_is_skipped_only_for_the_collectors_close(
    name: BackendName, collecting: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_var, _, reset_unless = _helpers(name)
    var: contextvars.ContextVar[int] = contextvars.ContextVar("helped", default=0)
    seen: list[int] = []

    def suspended() -> Any:
        token = set_var(var, 3)
        try:
            yield
        finally:
            reset_unless(var, token)
            seen.append(var.get())

    generator = suspended()
    next(generator)
    monkeypatch.setattr(_collector, "COLLECTING", collecting)
    generator.close()  # a GeneratorExit, as the collector's close of garbage throws
    assert seen == [3 if collecting else 0]
    monkeypatch.setattr(_collector, "COLLECTING", False)
    reset_unless(var, set_var(var, 4))  # no exception being handled: an ordinary reset
    assert var.get() == (3 if collecting else 0)
