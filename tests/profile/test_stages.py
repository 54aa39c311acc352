"""Per-stage profiles: samples go to the stage of the task that was running."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from litellm_perfkit._core._backend import Backend, BackendName
from litellm_perfkit._profile import _cpu_timer
from litellm_perfkit.profiling import StageProfiler
from tests.support import backends


def hash_passwords_in_auth() -> int:
    """The known CPU-heavy function: it runs only inside the auth stage."""
    return sum(i * i % 7 for i in range(60_000))


def encode_in_serialize() -> int:
    return sum(len(str(i)) for i in range(30_000))


def iterate_in_stream() -> int:
    return sum(i % 3 for i in range(20_000))


def make_app(backend: Backend) -> Any:
    stage = backend.stage

    async def chat(request: Request) -> Response:
        async with stage("auth"):
            await asyncio.sleep(0)  # let other requests' tasks run inside this stage
            hash_passwords_in_auth()
        async with stage("route"):
            await asyncio.sleep(0)
        if request.query_params.get("stream"):
            return StreamingResponse(chunks(), media_type="text/event-stream")
        with stage("serialize"):
            encode_in_serialize()
        return JSONResponse({"ok": True})

    @stage("stream.iterate")
    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(3):
            iterate_in_stream()
            await asyncio.sleep(0)
            yield b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
        yield b"data: [DONE]\n\n"

    return backend.middleware(Starlette(routes=[Route("/chat", chat, methods=["POST"])]))


async def load(app: Any, requests: int) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        for _ in range(requests // 8):
            await asyncio.gather(*(client.post("/chat" + ("?stream=1" if i % 2 else "")) for i in range(8)))


def functions_in(profile: dict, frames: list[dict]) -> set[str]:
    return {frames[i]["name"] for stack in profile["samples"] for i in stack}


@pytest.mark.parametrize("name", backends.NAMES)
def test_a_cpu_heavy_function_shows_in_its_own_stage_only(
    tmp_path: Path, name: BackendName, validate_speedscope: Callable[[dict[str, Any]], None]
) -> None:
    app = make_app(backends.load(name))
    with StageProfiler(interval_s=0.002) as profiler:
        asyncio.run(load(app, 96))
    written = profiler.write(tmp_path, prefix="test")
    document = json.loads((tmp_path / "test.speedscope.json").read_text())
    validate_speedscope(document)
    frames = document["shared"]["frames"]
    by_stage = {p["name"]: functions_in(p, frames) for p in document["profiles"]}
    counts = profiler.counts()
    assert counts["auth"] >= 20, counts
    assert "hash_passwords_in_auth" in by_stage["auth"]
    assert "encode_in_serialize" in by_stage["serialize"]
    assert "iterate_in_stream" in by_stage["stream.iterate"]
    for stage_name, functions in by_stage.items():
        if stage_name != "auth":
            assert "hash_passwords_in_auth" not in functions, stage_name
        if stage_name != "serialize":
            assert "encode_in_serialize" not in functions, stage_name
        if stage_name != "stream.iterate":
            assert "iterate_in_stream" not in functions, stage_name
    folded = (tmp_path / "test.auth.folded").read_text()
    assert "hash_passwords_in_auth (test_stages.py:" in folded
    assert len(written) == 1 + len(by_stage)
    assert profiler.errors == 0


def test_the_profiler_leaves_the_recorder_alone() -> None:
    """It reads the recorder's open stage: stages are the same code whether it runs or not."""
    backend = backends.load("c")
    methods = (backend.stage.__enter__, backend.stage.__exit__)
    profiler = StageProfiler()
    profiler.start()
    assert (backend.stage.__enter__, backend.stage.__exit__) == methods
    profiler.stop()
    asyncio.run(load(make_app(backend), 8))
    assert profiler.counts() == {} or sum(profiler.counts().values()) < 5  # nothing sampled once stopped


def test_start_off_the_main_thread_is_refused() -> None:
    import threading

    errors: list[BaseException] = []

    def run() -> None:
        try:
            StageProfiler().start()
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors and "main thread" in str(errors[0])


def _samples_of_two_equal_calls(profiler: StageProfiler) -> tuple[int, int]:
    """Two functions hash the same bytes (the GIL released); while the first hashes, another
    thread runs Python for about as long. The samples of each."""
    data = memoryview(bytes(range(256)) * 4_000)  # 1 MB
    kick, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        while not done.is_set():
            if kick.wait(0.1):
                kick.clear()
                started = time.thread_time()
                while time.thread_time() - started < 0.001:
                    pass

    def hash_beside_the_other_thread() -> bytes:
        kick.set()
        return hashlib.sha256(data).digest()

    def hash_alone() -> bytes:
        return hashlib.sha256(data).digest()

    worker = threading.Thread(target=other_thread)
    worker.start()
    try:
        with profiler:
            started = time.thread_time()
            while time.thread_time() - started < 1.5:
                hash_beside_the_other_thread()
                time.sleep(0.0003)  # the other thread's turn ends before the next hash
                hash_alone()
    finally:
        done.set()
        worker.join()
    leaves = Counter(stack[-1].co_name for counter in profiler.samples.values() for stack in counter.elements())
    return leaves["hash_beside_the_other_thread"], leaves["hash_alone"]


@contextlib.contextmanager
def _on_one_core_beside_a_hog() -> Iterator[None]:
    """The main thread (and the threads it starts) pinned to one core, with a process that
    spins on that core: every thread there is preempted at the kernel's tick."""
    core = max(os.sched_getaffinity(0))
    previous = os.sched_getaffinity(0)
    hog = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"])
    os.sched_setaffinity(0, {core})  # 0: the calling thread
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)
        hog.kill()
        hog.wait()


def test_the_main_threads_samples_are_its_own_cpu_not_another_threads() -> None:
    """Ground truth: two calls of equal CPU on the main thread, one of them while another
    thread runs, on a core shared with a CPU hog. On the thread's perf_event clock they get
    the same share of samples, whatever else runs on the machine (docs/profiling.md)."""
    with _on_one_core_beside_a_hog():
        profiler = StageProfiler(interval_s=0.001)  # 1,500 samples: the ratio's noise is 5%
        beside, alone = _samples_of_two_equal_calls(profiler)
    assert (profiler.clock, profiler.timer) == ("thread", "perf_event")  # Linux, perf_event_paranoid <= 1 or root
    assert beside + alone >= 1200 and 0.8 <= beside / alone <= 1.25, (beside, alone)
    # The samples share the main thread's CPU, not the process's.
    assert profiler.cpu_s == pytest.approx(1.5, abs=0.1)


@pytest.mark.quiet
def test_the_tick_timers_over_count_the_call_that_shares_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the perf_event clock is for: a POSIX thread timer is checked at the kernel's tick, so on
    a shared core its samples fall by the scheduler's turns, not the thread's CPU. Which call gains
    depends on the kernel and the machine: the call beside the other thread read 1.85 to 2.46 times
    the other's on one machine, 0.42 to 0.63 on another of the same kind. Either way outside the band
    perf_event is held to, and only alone (docs/profiling.md has the figures). The process's clock
    (setitimer) read 0.80 to 2.31: it is reported, not bounded."""
    monkeypatch.setattr(_cpu_timer, "_THREAD_TIMERS", _cpu_timer._THREAD_TIMERS[1:])  # as if perf_event were refused
    with _on_one_core_beside_a_hog():
        ratios = {}
        for profiler in (StageProfiler(interval_s=0.005), StageProfiler(interval_s=0.005, clock="process")):
            beside, alone = _samples_of_two_equal_calls(profiler)
            ratios[profiler.timer] = (beside, alone, round(beside / alone, 2))
    print(ratios)
    assert not 0.8 <= ratios["timer_create"][2] <= 1.25, ratios
    assert list(ratios) == ["timer_create", "setitimer"]


def test_a_refused_timer_falls_back_to_the_next_and_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(period_ns: int) -> Callable[[], None]:
        raise PermissionError(13, "perf_event_open")

    monkeypatch.setattr(_cpu_timer, "_THREAD_TIMERS", (("perf_event", refused), _cpu_timer._THREAD_TIMERS[1]))
    with StageProfiler() as profiler:
        assert (profiler.clock, profiler.timer, profiler.interval_s) == ("thread", "timer_create", 0.001)
    monkeypatch.setattr(_cpu_timer, "_THREAD_TIMERS", (("perf_event", refused),))
    with StageProfiler() as profiler:
        assert (profiler.clock, profiler.timer, profiler.interval_s) == ("process", "setitimer", 0.001)
    monkeypatch.undo()
    with StageProfiler() as profiler:  # the timer is exact: a longer default, as many samples per CPU second
        assert (profiler.clock, profiler.timer, profiler.interval_s) == ("thread", "perf_event", 0.005)
