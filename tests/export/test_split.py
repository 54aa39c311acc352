"""The CPU / queueing / I/O split of hand-made step records (times in ns)."""

from __future__ import annotations

import random

from litellm_perfkit._export._split import Split, time_split
from litellm_perfkit.types import RequestRecord, StageRecord


def record(steps: list[int], stages: tuple[StageRecord, ...] = (), cpu: list[int] | None = None) -> RequestRecord:
    """``steps``: early, late, start, end each; ``cpu``: each step's thread CPU (default -1: its wall time)."""
    cpu = cpu or [-1] * (len(steps) // 4)
    values = [v for i, c in enumerate(cpu) for v in (*steps[4 * i : 4 * i + 4], c)]
    return RequestRecord(start_ns=0, end_ns=100, steps=values, stages=stages)


def test_running_queued_and_waiting_add_up_to_the_wall_time() -> None:
    # ran 0-10; waited on I/O 10-40; ready from 40 (surely), ran 50-60; ready 60, ran 90-100
    steps = [0, 0, 0, 10, 40, 40, 50, 60, 60, 60, 90, 100]
    split = time_split(record(steps))
    assert split is not None
    assert split.request == Split(cpu_ns=30, queue_ns=40, io_ns=30, uncertain_ns=0)
    assert split.remainder == split.request


def test_maybe_ready_counts_half_as_queueing_and_says_so() -> None:
    # the event came in somewhere in 20-40 (the batch before), surely ready at 40
    split = time_split(record([0, 0, 0, 10, 20, 40, 50, 100]))
    assert split is not None
    assert split.request == Split(cpu_ns=60, queue_ns=20, io_ns=20, uncertain_ns=10)


def test_stages_get_the_part_of_each_interval_inside_them() -> None:
    steps = [0, 0, 0, 10, 40, 40, 50, 60, 60, 60, 90, 100]
    stages = (
        StageRecord("auth", 5, 55, parent=-1),  # ran 5-10 and 50-55, waited on I/O 10-40, queued 40-50
        StageRecord("db", 10, 40, parent=0),
        StageRecord("stream.iterate", 60, 90, parent=-1, kind="generator", self_ns=7),
        StageRecord("stream.upstream_wait", 60, 90, parent=-1, kind="sum", self_ns=20),
    )
    split = time_split(record(steps, stages))
    assert split is not None
    assert split.stages[0] == Split(10, 10, 30, 0)
    assert split.stages[1] == Split(0, 0, 30, 0)
    assert split.stages[2] == Split(7, 0, 0, 0)  # a generator's own time is its code running
    assert split.stages[3] == Split(0, 0, 20, 0)  # summed waits count as I/O wait
    # outside the top-level stages: 0-5 and 55-100, less the generator's 7 ms
    # of CPU and the summed waits' 20 ms (more than the 0 I/O left: none)
    assert split.remainder == Split(13, 30, 0, 0)


def test_overlapping_tasks_count_once() -> None:
    # two tasks of the request ready at once (0-20 and 10-30); one runs 20-30, the other 30-40
    split = time_split(record([0, 0, 20, 30, 10, 10, 30, 40]))
    assert split is not None
    assert split.request.cpu_ns == 20 and split.request.queue_ns == 20


def test_a_step_that_read_the_thread_cpu_clock_counts_that_spread_over_it_and_queues_the_rest() -> None:
    # ran 0-40 on the wall clock, of which 10 on the CPU (preempted); waited on I/O 40-60; ran 60-100 on 40 of CPU
    steps = [0, 0, 0, 40, 60, 60, 60, 100]
    stages = (
        StageRecord("auth", 0, 20, parent=-1),  # half of the first step: half its CPU
        StageRecord("pre_call", 20, 40, parent=-1),
        StageRecord("serialize", 70, 100, parent=-1),
    )
    split = time_split(record(steps, stages, cpu=[10, 40]))
    assert split is not None
    assert split.request == Split(cpu_ns=50, queue_ns=30, io_ns=20, uncertain_ns=0)
    assert split.stages[0] == Split(5, 15, 0, 0) and split.stages[1] == Split(5, 15, 0, 0)
    assert split.stages[2] == Split(30, 0, 0, 0)


def test_no_steps_no_split() -> None:
    assert time_split(record([])) is None


def test_a_sum_stage_is_split_over_its_calls_and_leaves_the_remainder() -> None:
    # ran 0-10, waited 10-40 (surely ready from 30), ran 40-50, waited 50-100 on I/O
    steps = [0, 0, 0, 10, 30, 30, 40, 50]
    waits = StageRecord("stream.upstream_wait", 10, 100, parent=-1, kind="sum", self_ns=80, intervals=(10, 40, 50, 100))
    split = time_split(record(steps, (waits,)))
    assert split is not None
    assert split.stages[0] == Split(0, 10, 70, 0)
    assert split.remainder == Split(20, 0, 0, 0)


def test_the_c_split_is_the_python_one() -> None:
    """Random steps (overlapping, out of order, empty, ready before the previous end), windows and
    thread calls: the accelerator's split_windows gives what the reference gives, window by window."""
    from litellm_perfkit._core import _speedups  # type: ignore[attr-defined]
    from litellm_perfkit._export._split import _split_python

    rng = random.Random(7)
    for _ in range(300):
        steps: list[int] = []
        clock = rng.randrange(0, 1000)
        for _ in range(rng.randrange(0, 40)):
            early = clock + rng.randrange(-50, 50)
            late = early + rng.randrange(0, 80)
            start = late + rng.randrange(-10, 60)
            end = start + rng.randrange(-5, 90)
            steps += (early, late, start, end, rng.choice((-1, rng.randrange(0, 120))))
            clock = end + rng.randrange(-30, 100)
        windows: list[int] = []
        for _ in range(rng.randrange(1, 12)):
            a = rng.randrange(-100, clock + 200)
            windows += (a, a + rng.randrange(-20, 600))
        calls: list[int] = []
        for _ in range(rng.randrange(0, 4)):
            a = rng.randrange(-100, clock + 200)
            calls += (a, a + rng.randrange(0, 300), rng.randrange(0, 400))
        expected = _split_python(steps, windows, calls)
        assert _speedups.split_windows(steps, windows, calls, Split) == expected, (steps, windows, calls)
        assert all(type(part) is Split for part in _speedups.split_windows(steps, windows, calls, Split))
        assert _speedups.split_windows(steps, windows) == [tuple(part) for part in _split_python(steps, windows)]


def random_record(rng: random.Random) -> RequestRecord:
    """Steps and stages of every kind at random: nested and top-level blocks (some open at the end, some
    outside the request's wall time), sums with their calls, threads (the protocol's among them), generators."""
    from litellm_perfkit._wire._names import AFTER_RESPONSE_STAGE, PROTOCOL_STAGE

    end = rng.randrange(200, 2000)
    steps: list[int] = []
    clock = 0
    while clock < end:
        early = clock + rng.randrange(-20, 20)
        late = early + rng.randrange(0, 50)
        start = late + rng.randrange(-5, 40)
        stop = start + rng.randrange(-5, 80)
        steps += (early, late, start, stop, rng.choice((-1, rng.randrange(0, 90))))
        clock = stop + rng.randrange(-10, 60)
    stages: list[StageRecord] = []
    for n in range(rng.randrange(0, 14)):
        start = rng.randrange(-50, end)
        stop = rng.choice((0, start + rng.randrange(0, end)))
        parent = rng.randrange(-1, n) if n else -1
        kind = rng.choice(("block", "block", "sum", "thread", "generator"))
        name = rng.choice(("auth", "routing", AFTER_RESPONSE_STAGE, PROTOCOL_STAGE, "llm_call"))
        width = {"sum": 2, "thread": 3}.get(kind, 0)
        intervals: list[int] = []
        for _ in range(rng.randrange(0, 4) if width else 0):
            a = rng.randrange(-50, end + 50)
            intervals += (a, a + rng.randrange(0, 200), rng.randrange(0, 150))[:width]
        if width and rng.random() < 0.2:
            intervals.append(rng.randrange(end))  # a stray value past the last whole call
        stages.append(
            StageRecord(name, start, stop, parent, kind, rng.randrange(0, 300), len(intervals) // 2, tuple(intervals))
        )
    return RequestRecord(
        start_ns=0,
        end_ns=end,
        steps=steps,
        stages=tuple(stages),
        after_last_byte_ns=rng.choice((0, rng.randrange(1, 500))),
    )


def test_the_c_time_split_is_the_python_one() -> None:
    """The accelerator's time_split (windows gathered and parts assembled in C) gives what the reference gives."""
    from litellm_perfkit._core import _speedups  # type: ignore[attr-defined]
    from litellm_perfkit._export import _split
    from litellm_perfkit._wire._names import OUTSIDE_WALL_STAGES, PROTOCOL_STAGE

    rng = random.Random(11)
    for seed in range(600):
        item = random_record(rng)
        expected = _split._time_split_python(item)
        if expected is None:
            continue
        fields = (item.stages, item.steps, item.start_ns, item.end_ns, item.after_last_byte_ns)
        split = _speedups.time_split(*fields, OUTSIDE_WALL_STAGES, PROTOCOL_STAGE, Split, _split.TimeSplit)
        assert split == expected, seed
        assert type(split) is _split.TimeSplit and all(type(part) is Split for part in split.stages)
    assert time_split(record([])) is None
