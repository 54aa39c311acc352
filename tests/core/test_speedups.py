"""The C accelerator against its reference, the pure-Python request path:
that it is built, its clock, the timeline's fields and stages.
test_speedups_exchange.py and test_speedups_handoff.py hold the rest; all run
both sides in one process under the same ticking fake clock (the other core
tests run each of their cases on both backends).
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from litellm_perfkit._core import _guard
from litellm_perfkit._core._backend import Backend, BackendName
from litellm_perfkit._core._timeline import OPEN_STAGE, TIMELINE
from tests.support import backends
from tests.support.clock import installed
from tests.support.speedups import TickClock, speedups

ROOT = Path(__file__).resolve().parents[2]
C, PYTHON = backends.load("c"), backends.load("python")


def test_the_c_accelerator_is_built_here() -> None:
    speedups()


@pytest.mark.parametrize(("mode", "name"), [("on", "c"), ("off", "python"), ("bogus", "c")])
def test_perfkit_speedups_chooses_the_backend(mode: str, name: str) -> None:
    code = "from litellm_perfkit._core._backend import ACTIVE; print(ACTIVE.name)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PERFKIT_SPEEDUPS": mode},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == name, result.stderr[-2000:]


def test_the_c_clock_is_perf_counter_ns() -> None:
    native = speedups()
    for _ in range(1000):
        before = time.perf_counter_ns()
        now = native.now_ns()
        assert before <= now <= time.perf_counter_ns()


def test_a_new_c_timeline_holds_what_the_python_reference_holds() -> None:
    from litellm_perfkit._core._timeline import LAYOUT

    c_timeline, python_timeline = C.timeline, PYTHON.timeline
    for args in [(5,), (5, "POST"), (5, "POST", "/v1/chat/completions")]:
        c, python = c_timeline(*args), python_timeline(*args)
        for name in LAYOUT.names:
            assert getattr(c, name) == getattr(python, name), name
    assert c_timeline(start_ns=7, path="/x").path == python_timeline(start_ns=7, path="/x").path == "/x"
    with pytest.raises(TypeError):
        c_timeline(path="/x")


def _index(stage: Any) -> int | None:
    return None if stage is None else int(stage.index)


def _stage_run(backend: Backend) -> tuple[list[Any], list[int | None]]:
    stage_class = backend.stage
    timeline = backend.timeline(0)
    token = TIMELINE.set(timeline)
    seen: list[int | None] = []
    try:
        with installed(TickClock()):  # type: ignore[arg-type]
            with stage_class("outer"):
                with stage_class("inner"):
                    seen.append(_index(OPEN_STAGE.get()))
                try:
                    with stage_class("fails"):
                        raise ValueError
                except ValueError:
                    pass
                moving = stage_class("moves between contexts")
                contextvars.copy_context().run(moving.__enter__)
                moving.__exit__(None, None, None)  # exited in another context: the parent is restored
                seen.append(_index(OPEN_STAGE.get()))
            seen.append(_index(OPEN_STAGE.get()))
            with stage_class("closed by the app"):
                try:
                    raise GeneratorExit
                except GeneratorExit:
                    pass
    finally:
        TIMELINE.reset(token)
    return timeline.finished, seen


def test_c_stages_record_what_python_stages_record() -> None:
    (python, python_seen), (c, c_seen) = _stage_run(PYTHON), _stage_run(C)
    assert c == python and c_seen == python_seen
    assert [name for _, name, *_ in c] == ["inner", "fails", "moves between contexts", "outer", "closed by the app"]
    assert python_seen == [1, 0, None]  # the open stage inside "inner", after the context hop, at the end


@pytest.mark.parametrize("name", backends.NAMES)
def test_a_stage_failure_is_counted_and_the_app_goes_on(name: BackendName) -> None:
    backend = backends.load(name)
    stage_class = backend.stage
    before = _guard.internal_error_counts()
    token = TIMELINE.set(object())  # type: ignore[arg-type]  # not a timeline
    try:
        with stage_class("auth") as entered:
            assert entered._timeline is None  # not recorded
    finally:
        TIMELINE.reset(token)
    timeline = backend.timeline(0)
    token = TIMELINE.set(timeline)
    try:
        with stage_class("auth"):
            timeline.finished = None  # type: ignore[assignment]
    finally:
        TIMELINE.reset(token)
    after = _guard.internal_error_counts()
    assert after["stage.enter"] == before.get("stage.enter", 0) + 1
    assert after["stage.exit"] == before.get("stage.exit", 0) + 1
    assert OPEN_STAGE.get() is None  # the failed exit still restored the context


# An accelerator object made without __init__ (Type.__new__(Type)) raises on
# use, as the Python reference's does (AttributeError of an unset slot): its
# methods read the NULL fields and died (SIGSEGV), so each runs in a process.
UNINITIALISED = {
    "exchange_send": "S.Exchange.__new__(S.Exchange).send({'type': 'http.response.body', 'body': b'x'})",
    "exchange_record": "S.Exchange.__new__(S.Exchange).record({'type': 'http.response.body', 'body': b'x'})",
    "exchange_finish": "S.Exchange.__new__(S.Exchange).finish()",
    "stage": "stage = S.Stage.__new__(S.Stage)\nwith stage:\n    pass",
    "tally_add": "S.Tally.__new__(S.Tally).add('GET', '/', 200, '', False, False, 1, -1)",
    "tally_series": "S.Tally.__new__(S.Tally).series()",
    "tally_clear": "S.Tally.__new__(S.Tally).clear()",
    "tally_passage": "S.Tally.__new__(S.Tally).passage('GET', print).close({}, None)",
    "batches_arm": "S.Batches.__new__(S.Batches).arm(1)",
}
UNINITIALISED_SCRIPT = """
import time
from litellm_perfkit._core._backend import backend
from litellm_perfkit._core._timeline import TIMELINE
S = backend("c").speedups
TIMELINE.set(backend("c").timeline(time.perf_counter_ns(), "GET", "/"))
try:
{use}
except (AttributeError, RuntimeError, TypeError) as error:
    print("raised", type(error).__name__)
else:
    print("no error")
"""


@pytest.mark.parametrize("use", sorted(UNINITIALISED))
def test_an_object_used_before_init_raises_not_crashes(use: str) -> None:
    code = textwrap.indent(UNINITIALISED[use], "    ")
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", UNINITIALISED_SCRIPT.format(use=code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.startswith("raised"), (result.returncode, result.stderr[-2000:])


def test_the_c_timelines_steps_are_an_int64_list_that_reads_as_the_list_of_its_values() -> None:
    steps = C.timeline(0).steps
    assert type(steps).__name__ == "Int64List" and steps == [] and len(steps) == 0
    values = [0, -1, 2**40, 2**63 - 1, -(2**63)]
    for value in values:
        steps.append(value)
    assert steps == values and not (steps != values) and steps.tolist() == values and list(steps) == values
    assert (steps[0], steps[-1], len(steps)) == (0, -(2**63), 5)
    assert repr(steps) == f"Int64List({values!r})"
    for bad, error in [(2**63, OverflowError), ("1", TypeError)]:
        with pytest.raises(error):
            steps.append(bad)
    with pytest.raises(IndexError):
        steps[5]
    assert steps == values  # a refused value leaves the list as it was
    steps += (7, 8)  # a sum stage's call, as the reference timeline adds one
    assert steps == [*values, 7, 8]
    with pytest.raises(TypeError):
        steps += (9, "x")
    assert steps == [*values, 7, 8]  # all or none


def test_the_c_encoder_writes_an_int64_list_as_the_list_it_stands_for() -> None:
    from litellm_perfkit._core._timeline import decode

    # Every count of marshal's 15-bit digits, both signs, past int32 and at int64's ends.
    values = [1, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**40, 2**63 - 1, -(2**63)]
    values += [sign * (2 ** (15 * digits) + extra) for digits in range(2, 5) for sign in (1, -1) for extra in (-1, 0)]
    timeline = C.timeline(0)
    for value in values:
        timeline.steps.append(value)
    encoded = C.speedups.encode_record(timeline)  # type: ignore[union-attr]
    assert encoded is not None
    assert decode(encoded).steps == decode(timeline.encode()).steps == values
    assert type(decode(encoded).steps) is list


def test_the_c_timelines_finished_stages_are_a_stage_list_that_reads_as_its_tuples() -> None:
    finished = C.timeline(0).finished
    assert type(finished).__name__ == "StageList" and finished == [] and len(finished) == 0
    stages = [(0, "auth", 10, 20, -1), (1, "routing", -(2**63), 2**63 - 1, 0), (2, "auth", 30, 31, 1)]
    for stage in stages:
        finished.append(stage)
    assert finished == stages and not (finished != stages) and finished.tolist() == stages
    assert list(finished) == stages and (finished[0], finished[-1]) == (stages[0], stages[-1])
    assert repr(finished) == f"StageList({stages!r})"
    for bad, error in [
        ((0, "x", 2**63, 0, -1), OverflowError),
        ((0, "x", "1", 0, -1), TypeError),
        ((0, "x"), TypeError),
    ]:
        with pytest.raises(error):
            finished.append(bad)
    with pytest.raises(IndexError):
        finished[3]
    assert finished == stages  # a refused stage leaves the list as it was
    assert finished.has("auth", 2) and not finished.has("routing", 2) and not finished.has("x", 0)
    with pytest.raises(TypeError):
        finished.has("auth")


def test_the_c_encoder_writes_a_stage_list_as_the_list_of_tuples_it_stands_for() -> None:
    from litellm_perfkit._core._timeline import decode

    timeline = C.timeline(0)
    timeline.finished.append((0, "auth", 1, 2**40, -1))
    timeline.finished.append((1, "é", 3, 4, 0))
    encoded = C.speedups.encode_record(timeline)  # type: ignore[union-attr]
    assert encoded is not None and decode(encoded) == decode(timeline.encode())
    assert [(s.name, s.start_ns, s.end_ns) for s in decode(encoded).stages] == [("auth", 1, 2**40), ("é", 3, 4)]


def test_a_freed_stage_list_is_kept_and_given_out_again_empty_and_tracked() -> None:
    finished = C.timeline(0).finished
    finished.append((0, "auth", 1, 2, -1))
    kept = id(finished)
    del finished
    again = C.timeline(0).finished
    assert id(again) == kept and again == [] and gc.is_tracked(again)


def test_a_freed_int64_list_is_kept_and_given_out_again_empty() -> None:
    steps = C.timeline(0).steps
    steps.append(7)
    kept = id(steps)
    del steps
    again = C.timeline(0).steps
    assert id(again) == kept and again == []


def test_a_freed_call_is_reused_and_a_finalized_one_is_not() -> None:
    """freelist.c: a StagedCall (like a StepClock) freed unfinalized gives its memory to the next one,
    tracked and zeroed; one whose finalizer ran keeps the collector's finalized flag, so it is freed, or
    its successor's finalizer would never run."""
    summed_call = speedups().summed_call
    flag: contextvars.ContextVar[bool] = contextvars.ContextVar("flag", default=False)

    async def seven() -> int:
        return 7

    async def waits() -> None:
        await asyncio.sleep(0)

    call = summed_call("x", seven(), flag)
    call.close()
    freed = id(call)
    del call
    reused = summed_call("x", seven(), flag)
    assert id(reused) == freed and gc.is_tracked(reused) and not gc.is_finalized(reused)
    assert asyncio.run(_awaited(reused)) == 7
    del reused

    started = summed_call("x", waits(), flag)
    started.send(None)  # started, not done: freed, its finalizer closes what it drives
    del started
    after = [summed_call("x", seven(), flag) for _ in range(3)]
    assert all(not gc.is_finalized(call) for call in after)
    for call in after:
        call.close()


def test_a_requests_timeline_exchange_and_stage_come_from_their_c_types_free_lists() -> None:
    """_backend's Python classes over the C Timeline, Exchange and Stage add nothing to their layout, so
    share_free_list gives them their C type's allocator: a freed one's memory is the next one's, zeroed
    and tracked, and the class keeps its reference count. A subclass that adds a field does not share."""
    backend = backends.load("c")
    timeline_class = backend.timeline
    exchange_class = backend.middleware._exchange_class
    timeline = timeline_class(1, "GET", "/")
    timeline.attributes["x"] = 1
    freed, references = id(timeline), sys.getrefcount(timeline_class)
    del timeline
    again = timeline_class(2, "POST", "/y")
    assert id(again) == freed and gc.is_tracked(again) and type(again) is timeline_class
    assert (again.start_ns, again.method, again.path, again.attributes) == (2, "POST", "/y", {})
    assert sys.getrefcount(timeline_class) == references
    stage = backend.stage("auth")
    freed = id(stage)
    del stage
    assert id(backend.stage("routing")) == freed
    exchange = exchange_class.__new__(exchange_class)
    freed = id(exchange)
    del exchange
    assert id(exchange_class.__new__(exchange_class)) == freed
    for _ in range(1000):  # taken and kept many times: the class's count stays
        timeline_class(0)
    assert sys.getrefcount(timeline_class) == references

    class WithField(timeline_class):  # type: ignore[misc,valid-type]
        __slots__ = ("field",)

    assert speedups().share_free_list(WithField) is False and not speedups().share_free_list(int)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
