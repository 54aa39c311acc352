"""The C accelerator against its reference, the pure-Python request path:
that it is built, that the core tests pass without it, its clock, the
timeline's fields and stages. test_speedups_exchange.py and
test_speedups_handoff.py hold the rest; all run both sides in one process
under the same ticking fake clock.
"""

from __future__ import annotations

import contextvars
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from litellm_perfkit._core import _guard, _stage
from litellm_perfkit._core._native import native
from litellm_perfkit._core._timeline import OPEN_STAGE, TIMELINE, Timeline
from tests.support.clock import installed
from tests.support.speedups import PyStage, TickClock, speedups

ROOT = Path(__file__).resolve().parents[2]
CStage = _stage.Stage


def test_the_c_accelerator_is_built_here() -> None:
    speedups()


def test_the_core_tests_pass_on_the_pure_python_path() -> None:
    env = {**os.environ, "PERFKIT_SPEEDUPS": "off"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/core", "--ignore-glob", "tests/core/test_speedups*.py"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def test_the_c_clock_is_perf_counter_ns() -> None:
    native = speedups()
    for _ in range(1000):
        before = time.perf_counter_ns()
        now = native.now_ns()
        assert before <= now <= time.perf_counter_ns()


def test_a_new_c_timeline_holds_what_the_python_reference_holds() -> None:
    from litellm_perfkit._core._timeline import _PyTimelineFields

    speedups()
    for args in [(5,), (5, "POST"), (5, "POST", "/v1/chat/completions")]:
        c, python = Timeline(*args), _PyTimelineFields(*args)
        for name in _PyTimelineFields.__slots__:
            assert getattr(c, name) == getattr(python, name), name
    assert Timeline(start_ns=7, path="/x").path == "/x"


def _stage_run(stage_class: type) -> tuple[list[Any], list[int]]:
    timeline = Timeline(0)
    token = TIMELINE.set(timeline)
    seen: list[int] = []
    try:
        with installed(TickClock()):  # type: ignore[arg-type]
            with stage_class("outer"):
                with stage_class("inner"):
                    seen.append(OPEN_STAGE.get())
                try:
                    with stage_class("fails"):
                        raise ValueError
                except ValueError:
                    pass
                moving = stage_class("moves between contexts")
                contextvars.copy_context().run(moving.__enter__)
                moving.__exit__(None, None, None)  # exited in another context: the parent is restored
                seen.append(OPEN_STAGE.get())
            seen.append(OPEN_STAGE.get())
            with stage_class("closed by the app"):
                try:
                    raise GeneratorExit
                except GeneratorExit:
                    pass
    finally:
        TIMELINE.reset(token)
    return timeline.finished, seen


def test_c_stages_record_what_python_stages_record() -> None:
    speedups()
    (python, python_seen), (c, c_seen) = _stage_run(PyStage), _stage_run(CStage)
    assert c == python and c_seen == python_seen
    assert [name for _, name, *_ in c] == ["inner", "fails", "moves between contexts", "outer", "closed by the app"]
    assert python_seen == [1, 0, -1]  # the open stage inside "inner", after the context hop, at the end


@pytest.mark.parametrize("stage_class", [PyStage, CStage], ids=["python", "c"])
def test_a_stage_failure_is_counted_and_the_app_goes_on(stage_class: type) -> None:
    before = _guard.internal_error_counts()
    token = TIMELINE.set(object())  # type: ignore[arg-type]  # not a timeline
    try:
        with stage_class("auth") as entered:
            assert entered._timeline is None  # not recorded
    finally:
        TIMELINE.reset(token)
    timeline = Timeline(0)
    token = TIMELINE.set(timeline)
    try:
        with stage_class("auth"):
            timeline.finished = None  # type: ignore[assignment]
    finally:
        TIMELINE.reset(token)
    after = _guard.internal_error_counts()
    assert after["stage.enter"] == before.get("stage.enter", 0) + 1
    assert after["stage.exit"] == before.get("stage.exit", 0) + 1
    assert OPEN_STAGE.get() == -1  # the failed exit still restored the context
