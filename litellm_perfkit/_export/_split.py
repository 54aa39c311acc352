"""A request's time and each stage's, split into CPU, event-loop queueing and I/O wait.

From the steps the request path recorded (``RequestRecord.steps``, see
``_core/_steps.py``): in any window, CPU is the time some step of the
request ran; queueing is the time some step was surely ready and none ran,
plus half the time one may have been; I/O wait is the rest. The three add
up to the window's wall time. A step that read the thread's CPU clock
(``PERFKIT_STEPS=cpu``) ran only that long: its CPU is spread evenly over
its wall time, and the rest of its wall time, preempted or waiting for the
GIL, is queueing (ready, not running). Runs on the export side only.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import NamedTuple

from .._core._steps import STEP_SIZE
from .._wire._names import OUTSIDE_WALL_STAGES, PROTOCOL_STAGE
from ..types import RequestRecord

__all__ = ["Split", "TimeSplit", "time_split"]


class Split(NamedTuple):
    cpu_ns: int
    queue_ns: int
    io_ns: int
    uncertain_ns: int
    """Queueing and I/O wait are each exact to within this: half the time a
    step may or may not have been ready (``_core/_steps.py``)."""


class TimeSplit(NamedTuple):
    request: Split
    stages: list[Split]
    """By position in ``RequestRecord.stages``."""
    remainder: Split
    """The request's time outside every top-level block stage."""
    after_last_byte: Split | None = None
    """The app's time after its last byte (``RequestRecord.after_last_byte_ns``), when it has some."""


class _Intervals:
    """Disjoint, sorted intervals, and the measure of their overlap with any window."""

    __slots__ = ("starts", "ends", "before")

    def __init__(self, intervals: list[tuple[int, int]]) -> None:
        self.starts = [s for s, _ in intervals]
        self.ends = [e for _, e in intervals]
        total, self.before = 0, [0]
        for s, e in intervals:
            total += e - s
            self.before.append(total)

    def measure(self, a: int, b: int) -> int:
        if b <= a or not self.starts:
            return 0
        first = max(0, bisect_right(self.ends, a))  # the first interval ending after a
        last = bisect_right(self.starts, b)  # intervals starting before b
        if first >= last:
            return 0
        inside = self.before[last] - self.before[first]
        inside -= max(0, a - self.starts[first])
        inside -= max(0, self.ends[last - 1] - b)
        return inside


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def _minus(intervals: list[tuple[int, int]], removed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``intervals`` less ``removed`` (both disjoint and sorted)."""
    out: list[tuple[int, int]] = []
    k = 0
    for s, e in intervals:
        while k < len(removed) and removed[k][1] <= s:
            k += 1
        j = k
        while s < e and j < len(removed) and removed[j][0] < e:
            if removed[j][0] > s:
                out.append((s, removed[j][0]))
            s = max(s, removed[j][1])
            j += 1
        if s < e:
            out.append((s, e))
    return out


def _inside(a: int, b: int, intervals: list[tuple[int, int]]) -> bool:
    return any(s <= a and b <= e for s, e in intervals)


class _CpuIntervals:
    """The steps' CPU: disjoint, sorted intervals, each with the CPU its step
    read, spread evenly over it; the CPU inside any window."""

    __slots__ = ("starts", "ends", "cpu", "before")

    def __init__(self, steps: list[tuple[int, int, int]]) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.cpu: list[int] = []
        self.before = [0]
        last_end = None
        for s, e, cpu in sorted(steps):
            # An overlap (a step clocked inside another) keeps the earlier one's, and the later one's CPU in proportion.
            cut = s if last_end is None or s >= last_end else last_end
            if e <= cut:
                continue
            cpu = e - s if cpu < 0 else min(cpu, e - s)  # -1: the wall clock's step, whose CPU is its wall time
            if cut > s:
                cpu = cpu * (e - cut) // (e - s)
            self.starts.append(cut)
            self.ends.append(e)
            self.cpu.append(cpu)
            self.before.append(self.before[-1] + cpu)
            last_end = e

    def _part(self, i: int, length: int) -> int:
        """The CPU of ``length`` ns of interval ``i``."""
        return self.cpu[i] * length // (self.ends[i] - self.starts[i])

    def measure(self, a: int, b: int) -> int:
        if b <= a or not self.starts:
            return 0
        first = bisect_right(self.ends, a)
        last = bisect_right(self.starts, b)
        if first >= last:
            return 0
        inside = self.before[last] - self.before[first]
        if a > self.starts[first]:
            inside -= self._part(first, a - self.starts[first])
        if self.ends[last - 1] > b:
            inside -= self._part(last - 1, self.ends[last - 1] - b)
        return max(0, inside)


class _Splitter:
    def __init__(self, steps: list[int]) -> None:
        steps = steps[: len(steps) - len(steps) % STEP_SIZE]
        early, late, start, end, cpu = (steps[k::STEP_SIZE] for k in range(STEP_SIZE))
        running = _union(list(zip(start, end)))
        queued = _minus(_union(list(zip(late, start))), running)
        maybe = _minus(_minus(_union(list(zip(early, late))), running), queued)
        self.running, self.queued, self.maybe = _Intervals(running), _Intervals(queued), _Intervals(maybe)
        self.cpu = _CpuIntervals(list(zip(start, end, cpu)))

    def split(self, a: int, b: int) -> Split:
        ran, queue, maybe = self.running.measure(a, b), self.queued.measure(a, b), self.maybe.measure(a, b)
        cpu = min(ran, self.cpu.measure(a, b))
        queue += ran - cpu + maybe // 2  # a step's wall time off the CPU: ready, not running
        return Split(cpu, queue, max(0, b - a - cpu - queue), maybe - maybe // 2)


def _split_python(
    steps: list[int], windows: list[int], calls: list[int] | None = None, cls: type[Split] | None = None
) -> list[Split]:
    """Each (start, end) window of the flat ``windows``, split: the reference
    for the C accelerator's ``split_windows``.

    ``calls`` (flat: start, end, the thread's CPU) are thread calls made on
    the request's behalf: a thread's CPU is the request's CPU, not its
    waiting, so it moves from I/O wait to CPU in every window a call lies in.
    ``cls`` is the C one's result type; the parts here are always ``Split``."""
    splitter = _Splitter(steps)
    calls = calls or []
    parts = []
    for i in range(0, len(windows) - 1, 2):
        a, b = windows[i], windows[i + 1]
        cpu, queue, io, uncertain = splitter.split(a, b)
        for c in range(0, len(calls) - 2, 3):
            if a <= calls[c] and calls[c + 1] <= b:
                shift = min(calls[c + 2], io)
                cpu, io = cpu + shift, io - shift
        parts.append(Split(cpu, queue, io, uncertain))
    return parts


def _split_function() -> Callable[[list[int], list[int], list[int], type[Split]], list[Split]]:
    """The C accelerator's split (20x faster) when it runs, else the reference."""
    from .._core._backend import ACTIVE

    return _split_python if ACTIVE.speedups is None else ACTIVE.speedups.split_windows


split_windows = _split_function()


def _thread_calls(record: RequestRecord) -> list[int]:
    """The request's thread calls, flat (start, end, CPU). Not the server's
    protocol work: for the request, a read of its body was waiting; that
    CPU is the protocol stage's, outside the request's windows."""
    calls: list[int] = []
    for stage in record.stages:
        if stage.kind == "thread" and stage.name != PROTOCOL_STAGE:
            calls += stage.intervals[: len(stage.intervals) // 3 * 3]
    return calls


def _time_split_python(record: RequestRecord) -> TimeSplit | None:
    """The split, or None when the request recorded no steps (step accounting off):
    the reference for the C accelerator's ``time_split``."""
    if not record.steps:
        return None
    # Every window at once: the request, each block stage, each sum stage's
    # calls, then the top-level block stages' union.
    # The request's wall time ends at its last byte; the app's time after
    # it, to its return, is a window of its own, and a stage's part after
    # it is outside the request's (its remainder counts none of it).
    wall_end = record.end_ns
    windows = [record.start_ns, wall_end, wall_end, wall_end + record.after_last_byte_ns]
    top: list[tuple[int, int]] = []
    for stage in record.stages:
        if stage.kind == "block":
            end = stage.end_ns or wall_end
            windows += (stage.start_ns, end)
            if stage.parent < 0 and stage.name not in OUTSIDE_WALL_STAGES:  # outside the request's window
                top.append((stage.start_ns, min(end, wall_end)))
        elif stage.kind == "sum":
            windows += stage.intervals[: len(stage.intervals) // 2 * 2]
    blocks = _union(top)
    for block in blocks:
        windows += block
    parts = iter(split_windows(record.steps, windows, _thread_calls(record), Split))
    request = next(parts)
    after = next(parts)
    stages: list[Split] = []
    for stage in record.stages:
        if stage.kind == "block":
            stages.append(next(parts))
        elif stage.kind == "generator":
            stages.append(Split(stage.self_ns, 0, 0, 0))  # its own time is its code running: CPU
        elif stage.kind == "thread":
            stages.append(Split(stage.self_ns, 0, max(0, stage.duration_ns - stage.self_ns), 0))
        else:
            calls = [next(parts) for _ in range(len(stage.intervals) // 2)]
            stages.append(Split(*map(sum, zip(*calls))) if calls else Split(0, 0, stage.self_ns, 0))
    # Outside every top-level block stage: the request's time less those
    # stages' and less the generator and sum stages that ran outside them
    # (a stream's loop after the LLM call returned).
    covered = list(parts)
    covered += [
        split
        for stage, split in zip(record.stages, stages)
        if stage.kind != "block"
        and stage.name not in OUTSIDE_WALL_STAGES
        and stage.start_ns < wall_end
        and not _inside(stage.start_ns, stage.end_ns, blocks)
    ]
    remainder = Split(*(max(0, total - sum(part[i] for part in covered)) for i, total in enumerate(request)))
    return TimeSplit(request, stages, remainder, after if record.after_last_byte_ns > 0 else None)


def _time_split_function() -> Callable[[RequestRecord], TimeSplit | None]:
    """The C accelerator's time split (gathering the windows and assembling the parts too) when it runs, else the reference."""
    from .._core._backend import ACTIVE

    if ACTIVE.speedups is None:
        return _time_split_python
    split = ACTIVE.speedups.time_split

    def time_split(record: RequestRecord) -> TimeSplit | None:
        if not record.steps:
            return None
        result: TimeSplit = split(
            record.stages,
            record.steps,
            record.start_ns,
            record.end_ns,
            record.after_last_byte_ns,
            OUTSIDE_WALL_STAGES,
            PROTOCOL_STAGE,
            Split,
            TimeSplit,
        )
        return result

    return time_split


time_split = _time_split_function()
"""A request's time and each stage's split (``TimeSplit``), or None when it recorded no steps (step accounting off)."""
