"""The C hand-off to the export agent and its record writer against the
Python path (Timeline.encode and the queue's batch frame)."""

from __future__ import annotations

import os
import random
import threading
from typing import Any

import pytest

from litellm_perfkit._core._timeline import Timeline, decode
from tests.support.speedups import new_handoff, read_frame, speedups
from tests.support.timelines import sample_timeline


def test_the_handoff_writes_the_frame_the_python_path_builds() -> None:
    from litellm_perfkit._export._frames import batch_frame, read_batch

    native = speedups()
    timelines = [sample_timeline(), sample_timeline()]
    timelines[1].attributes["huge"] = 1 << 70  # past 64 bits: the C writer declines, Timeline.encode() writes it
    handoff = new_handoff(8, 1 << 16, lambda: None)
    for timeline in timelines:
        handoff.submit(timeline)
    assert handoff.pending == 2
    read_end, write_end = os.pipe()
    try:
        assert handoff.write_frame(write_end, -123) == 2
        frame = read_frame(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    anchor, dropped, decoded = read_batch(frame[5:])
    assert (anchor, dropped) == (-123, 0)
    assert [decode(record) for record in decoded] == [t.freeze() for t in timelines]
    assert decoded[0] == native.encode_record(timelines[0])  # the C writer's record
    assert native.encode_record(timelines[1]) is None  # declined: Timeline.encode()'s
    assert frame == batch_frame(-123, 0, decoded)  # the frame the path without C builds
    assert handoff.pending == 0 and handoff.write_frame(1, 0) == 0  # nothing queued: nothing written


def test_a_full_handoff_drops_and_counts_and_wakes_the_drain_at_three_quarters() -> None:
    speedups()
    wakes: list[int] = []
    handoff = new_handoff(8, 1 << 16, lambda: wakes.append(handoff.pending))
    # Nothing drains it: an append that waited for room would never return.
    appender = threading.Thread(target=lambda: [handoff.append(b"x" * 100) for _ in range(100)], daemon=True)
    appender.start()
    appender.join(30)
    assert not appender.is_alive(), "an append into the full hand-off waited for room"
    assert (handoff.pending, handoff.dropped, wakes) == (8, 92, [6])
    by_bytes = new_handoff(1000, 1024, lambda: wakes.append(-by_bytes.pending))
    for _ in range(20):
        by_bytes.append(b"y" * 100)  # 104 bytes a record, 21 of frame header: 9 fit
    assert (by_bytes.pending, by_bytes.dropped, wakes[1:]) == (9, 11, [-8])


def test_a_failed_write_drops_and_counts_the_records() -> None:
    speedups()
    handoff = new_handoff(8, 1 << 16, lambda: None)
    handoff.append(b"x")
    handoff.append(b"y")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        with pytest.raises(OSError):  # EPIPE (SIGPIPE is ignored by Python)
            handoff.write_frame(write_end, 0)
    finally:
        os.close(write_end)
    assert (handoff.pending, handoff.dropped) == (0, 2)


def _odd_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.1:
        return [_odd_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    if depth < 3 and roll < 0.15:
        return {rng.choice(["k", "é", 'q"']): _odd_value(rng, depth + 1)}
    if depth < 3 and roll < 0.17:
        return {1: "a non-str key"}
    return rng.choice(
        [
            None,
            True,
            False,
            0,
            -1,
            2**63 - 1,
            -(2**63),
            2**70,
            0.1,
            -2.5e-300,
            1e16,
            float("inf"),
            float("nan"),
            "",
            "plain",
            'quote " and \\ backslash',
            "tab\tnew\nline\x00\x1f",
            "é漢字🙂",
            "\ud800 lone surrogate",
        ]
    )


def _random_timeline(rng: random.Random, odd: bool) -> Timeline:
    timeline: Timeline = sample_timeline(rng)
    if odd:
        timeline.attributes["odd"] = _odd_value(rng)
    return timeline


def test_the_c_record_writer_encodes_what_timeline_encode_encodes() -> None:
    """Every record the hand-off writes decodes to what Timeline.encode()'s
    decodes to; values the C writer does not write (2**70, surrogates) go
    through Timeline.encode() and decode the same too."""
    from litellm_perfkit._export._frames import read_batch

    native = speedups()
    rng = random.Random(11)
    for round_number in range(40):
        timelines = [_random_timeline(rng, odd=round_number % 2 == 1) for _ in range(25)]
        handoff = new_handoff(100, 1 << 20, lambda: None)
        for timeline in timelines:
            handoff.submit(timeline)
        read_end, write_end = os.pipe()
        try:
            handoff.write_frame(write_end, 0)
            _, _, records = read_batch(read_frame(read_end)[5:])
        finally:
            os.close(read_end)
            os.close(write_end)
        assert len(records) == len(timelines) and handoff.dropped == 0
        for timeline, record in zip(timelines, records):
            expected = timeline.encode()
            if round_number % 2 == 0:  # plain values: the C writer's own record, not declined
                assert record == native.encode_record(timeline) and record[:1] == b")"
            c, python = decode(record), decode(expected)
            assert repr(c) == repr(python)  # repr: NaN equals nothing, itself included
