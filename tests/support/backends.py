"""Both implementations of the request path, for tests that run each in one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from litellm_perfkit._core._backend import Backend, BackendName, backend

NAMES: tuple[BackendName, ...] = ("python", "c")


def load(name: BackendName) -> Backend:
    """The backend; the C one fails loudly when the accelerator was not built."""
    try:
        return backend(name)
    except ImportError:
        raise AssertionError(
            "litellm_perfkit._core._speedups was not built (no C compiler at install time): "
            "install gcc and the Python headers, then `pip install -e .` again"
        ) from None


ROOT = Path(__file__).resolve().parents[2]

FINALIZER_SETUP = """
import contextvars, gc, time
from litellm_perfkit._core._backend import ACTIVE
from litellm_perfkit._core._timeline import TIMELINE

V = contextvars.ContextVar("v")

class Garbage:
    def __init__(self):
        self.me = self
    def __del__(self):
        V.set(object())

others = [contextvars.ContextVar(f"v{i}") for i in range(40)]
for var in others:
    var.set(0)
timeline = ACTIVE.timeline(time.perf_counter_ns(), "GET", "/")
TIMELINE.set(timeline)
"""
"""The start of a script whose rounds make cycles with a finalizer that sets a
ContextVar, as a host's may (gh-148891): a collection that starts inside
perfkit's own ContextVar.set runs it there. Each round, with ``n`` its number::

    if n % 500 == 0:  # where a collection starts decides whether it crashes
        gc.set_threshold((7, 50, 101, 13, 77, 29)[n // 500 % 6], 1, 1)
    for _ in range(3):
        Garbage()
"""


def assert_survives(script: str, name: BackendName, *args: str) -> None:
    """Runs ``script`` (which prints "survived" at its end) in a fresh interpreter on
    backend ``name``: a crash (SIGSEGV) fails the test with faulthandler's frames."""
    env = {**os.environ, "PERFKIT_SPEEDUPS": "on" if name == "c" else "off"}
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.strip() == "survived", (result.returncode, result.stderr[-2000:])


SUSPENDED_SETUP = """
import contextvars, gc, sys, time
from litellm_perfkit._core._backend import ACTIVE
from litellm_perfkit._core._timeline import TIMELINE

class Never:
    def __await__(self):
        yield

def suspended_garbage(make):
    for _ in range(20):
        holder = []
        coroutine = make(timeline)
        coroutine.send(None)
        holder.append(coroutine)
        holder.append(holder)
        del coroutine, holder

others = [contextvars.ContextVar(f"v{i}") for i in range(40)]
timeline = ACTIVE.timeline(time.perf_counter_ns(), "GET", "/")
TIMELINE.set(timeline)
"""
"""The start of a script whose rounds leave coroutines suspended in the running request and
collected as garbage (gh-148891): ``suspended_garbage(make)`` starts twenty ``make(timeline)``
(each suspends at ``Never()``) and leaves each in a reference cycle. Each round, with ``n``
its number::

    suspended_garbage(make)
    for var in others:
        var.set(n)  # a collection can start inside any of these sets
"""
