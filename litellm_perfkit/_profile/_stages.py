"""Per-stage profiles: CPU samples of the event-loop thread, each attributed
to the stage of the asyncio task that was running when it was taken.

Thread tags cannot do this under asyncio: every request shares one thread.
The running task can: a ``SIGPROF`` handler runs on the main thread between
two bytecodes, inside whatever task is running (its context, its step's
clock), so the recorder's ``open_stage()`` read there is that task's stage. The profiler adds nothing
to the request path: stages cost the same with it on or off.

Async-generator stages (``stream.iterate``) are found on the sampled stack
itself: the frame of perfkit's ``_timed_generator`` carries the stage name.
"""

from __future__ import annotations

import signal
import threading
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import orjson

from .._core._stage import _timed_generator, open_stage
from .._version import __version__
from ..types import CpuClock, CpuTimerKind
from ._cpu_timer import CpuTimer

__all__ = ["StageProfiler", "NO_STAGE"]

NO_STAGE = "(no stage)"
_GENERATOR_CODE = _timed_generator.__code__


class StageProfiler:
    """Samples the main thread's stack every ``interval_s`` of that thread's CPU time
    (``clock="thread"``; the process's where the system has no per-thread CPU timer,
    or when asked: then other threads' CPU is charged to the main thread's stack).

    ``start()`` and ``stop()`` must be called on the main thread (where
    uvicorn and the LiteLLM proxy run their event loop). ``write(directory)``
    gives one speedscope file with a profile per stage, and a folded-stacks
    file per stage (for flamegraph.pl or inferno).
    """

    def __init__(self, interval_s: float | None = None, max_depth: int = 200, clock: CpuClock = "thread") -> None:
        if interval_s is not None and interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.max_depth = max_depth
        self.samples: dict[str, Counter[tuple[CodeType, ...]]] = {}
        self.errors = 0
        self._timer = CpuTimer(interval_s, clock)
        self.cpu_s = 0.0  # the sampled clock's CPU time while on: what the samples share
        self._cpu_started = 0.0
        self._previous_handler: Any = None
        self.running = False

    # -- on / off -------------------------------------------------------------
    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("StageProfiler.start() must run on the main thread (it installs a SIGPROF handler)")
        if self.running:
            return
        self._previous_handler = signal.signal(signal.SIGPROF, self._sample)
        self._timer.start()
        self._cpu_started = self._timer.cpu_time()
        self.running = True

    def stop(self) -> None:
        if not self.running:
            return
        self._timer.stop()
        self.cpu_s += self._timer.cpu_time() - self._cpu_started
        signal.signal(signal.SIGPROF, self._previous_handler or signal.SIG_DFL)
        self.running = False

    @property
    def clock(self) -> CpuClock:
        """The CPU clock the samples are taken on: the main thread's, or the process's."""
        return self._timer.clock

    @property
    def interval_s(self) -> float:
        """CPU seconds between samples: as asked, or the timer's default (5 ms on ``perf_event``,
        1 ms on the timers the kernel checks at its tick)."""
        return self._timer.interval_s

    @property
    def timer(self) -> CpuTimerKind:
        """What times the samples (after ``start()``): ``perf_event`` where the kernel allows it."""
        return self._timer.kind

    def __enter__(self) -> StageProfiler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the signal handler: runs on the main thread, in the running task's context
    def _sample(self, signum: int, frame: FrameType | None) -> None:
        try:
            stack: list[CodeType] = []
            generator: tuple[str, int] | None = None
            depth = 0
            while frame is not None and depth < self.max_depth:
                code = frame.f_code
                if code is _GENERATOR_CODE and generator is None:
                    local = frame.f_locals
                    generator = (local.get("name", "?"), local.get("started", 0))
                stack.append(code)
                frame = frame.f_back
                depth += 1
            stage = self._stage_of(generator)
            stack.reverse()
            counter = self.samples.get(stage)
            if counter is None:
                counter = self.samples[stage] = Counter()
            counter[tuple(stack)] += 1
        except Exception:  # never let a sample break the host
            self.errors += 1

    @staticmethod
    def _stage_of(generator: tuple[str, int] | None) -> str:
        block = open_stage()
        if block is not None and block.index < 0:
            block = None  # created outside a request: nothing recorded
        if generator is None:
            return block.name if block is not None else NO_STAGE
        if block is None:
            return generator[0]
        # The innermost of the two: whichever was entered last.
        return block.name if block.start_ns > generator[1] else generator[0]

    # -- output -----------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        return {stage: sum(counter.values()) for stage, counter in self.samples.items()}

    @property
    def seconds_per_sample(self) -> float:
        """CPU seconds one sample stands for: the CPU time measured while on over the samples,
        not ``interval_s``, which a POSIX timer takes at most once a kernel tick (4 ms at HZ=250)."""
        samples = sum(self.counts().values())
        return self.cpu_s / samples if samples and self.cpu_s else self.interval_s

    def speedscope(self, name: str = "perfkit stage profile") -> dict[str, Any]:
        """One sampled profile per stage, sharing one frame table (speedscope's file format)."""
        frames: list[dict[str, Any]] = []
        index: dict[CodeType, int] = {}

        def frame_id(code: CodeType) -> int:
            found = index.get(code)
            if found is None:
                found = index[code] = len(frames)
                frames.append({"name": code.co_name, "file": code.co_filename, "line": code.co_firstlineno})
            return found

        profiles = []
        weight = self.seconds_per_sample
        for stage, counter in sorted(self.samples.items(), key=lambda item: -sum(item[1].values())):
            stacks = list(counter.items())
            total = sum(counter.values()) * weight
            profiles.append(
                {
                    "type": "sampled",
                    "name": stage,
                    "unit": "seconds",
                    "startValue": 0,
                    "endValue": total,
                    "samples": [[frame_id(code) for code in stack] for stack, _ in stacks],
                    "weights": [count * weight for _, count in stacks],
                }
            )
        return {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": frames},
            "profiles": profiles,
            "name": name,
            "activeProfileIndex": 0,
            "exporter": f"litellm_perfkit {__version__}",
        }

    def folded(self, stage: str) -> str:
        """``root;caller;callee count`` lines (Brendan Gregg's collapsed format)."""
        lines = []
        for stack, count in self.samples.get(stage, Counter()).items():
            names = ";".join(f"{code.co_name} ({Path(code.co_filename).name}:{code.co_firstlineno})" for code in stack)
            lines.append(f"{names} {count}")
        return "\n".join(sorted(lines)) + "\n"

    def write(self, directory: str | Path, prefix: str = "stages") -> list[Path]:
        """``prefix.speedscope.json`` plus ``prefix.STAGE.folded`` per stage."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = [out / f"{prefix}.speedscope.json"]
        written[0].write_bytes(
            orjson.dumps(self.speedscope(f"{prefix}: samples by stage, on the {self.clock}'s CPU clock"))
        )
        for stage in self.samples:
            path = out / f"{prefix}.{_file_safe(stage)}.folded"
            path.write_text(self.folded(stage))
            written.append(path)
        return written


def _file_safe(stage: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in stage)
