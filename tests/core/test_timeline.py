from __future__ import annotations

import random

from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._context import TIMELINE
from litellm_perfkit._core._timeline import decode
from tests.support.clock import installed
from tests.support.timelines import sample_timeline


def test_encode_and_decode_keep_every_field() -> None:
    for seed in range(20):
        timeline = sample_timeline(random.Random(seed))
        assert decode(timeline.encode()) == timeline.freeze()


def test_values_json_would_lose_are_kept() -> None:
    timeline = sample_timeline()
    timeline.attributes.update(huge=1 << 70, infinite=float("inf"), surrogate="\ud800")
    assert decode(timeline.encode()) == timeline.freeze()


def test_a_sum_stages_calls_under_different_stages_are_one_stage_each(backend: Backend) -> None:
    with installed() as clock:
        timeline = backend.timeline(clock(), "POST", "/x")
        token = TIMELINE.set(timeline)
        with backend.stage("endpoint"):
            start = clock()
            clock.advance_ms(1)
            timeline.add_generator_time("stream.upstream_wait", start, 1_000_000, 1, "sum")
        with backend.stage("response"):  # opened after the sum stage's first call
            for _ in range(2):
                start = clock()
                clock.advance_ms(2)
                timeline.add_generator_time("stream.upstream_wait", start, 2_000_000, 1, "sum")
        timeline.end_ns = clock()
        TIMELINE.reset(token)
    record = decode(timeline.encode())
    waits = [stage for stage in record.stages if stage.name == "stream.upstream_wait"]
    assert [(record.stages[w.parent].name, w.items, w.duration_ns, len(w.intervals)) for w in waits] == [
        ("endpoint", 1, 1_000_000, 2),
        ("response", 2, 4_000_000, 4),
    ]
    assert all(record.stages.index(w) > w.parent for w in waits)


def random_stages(rng: random.Random) -> tuple[list, dict]:  # type: ignore[type-arg]
    """Finished stages and generator entries as a record carries them: nested blocks, generators, sum and
    thread stages whose calls ran under several parents (some started after the first call), stray values."""
    finished = []
    for index in range(rng.randrange(0, 12)):
        start = rng.randrange(0, 1000)
        finished.append(
            (
                index,
                rng.choice(("auth", "routing", "endpoint")),
                start,
                start + rng.randrange(0, 500),
                rng.randrange(-1, index + 3),
            )
        )
    generators: dict[str, list[object]] = {}
    for name, kind, size in (
        ("stream.iterate", "generator", 0),
        ("callbacks.check", "sum", 3),
        ("threads", "thread", 4),
    ):
        if rng.random() < 0.3:
            continue
        calls: list[int] = []
        for _ in range(rng.randrange(0, 6) if size else 0):
            a = rng.randrange(0, 1000)
            calls += (a, a + rng.randrange(0, 100), rng.randrange(0, 80), rng.randrange(-1, 14))[4 - size :]
        if size and rng.random() < 0.2:
            calls.append(rng.randrange(5))  # past the last whole call
        index = rng.randrange(0, 14)
        generators[name] = [index, rng.randrange(1000), rng.randrange(1000), rng.randrange(-1, 14), 7, 3, kind, calls]
    return finished, generators


def test_the_c_stage_records_are_the_python_ones() -> None:
    """The accelerator's stage_records (rows ordered, parents made positions, each StageRecord built without
    ``__init__``) gives what the reference gives: equal, frozen, with the same instance layout."""
    import dataclasses

    import pytest

    from litellm_perfkit._core import _timeline
    from litellm_perfkit.types import StageRecord
    from tests.support.speedups import speedups

    fields = tuple(field.name for field in dataclasses.fields(StageRecord))
    build = speedups().stage_records
    rng = random.Random(3)
    for seed in range(500):
        finished, generators = random_stages(rng)
        built = build(finished, generators, StageRecord, fields)
        expected = _timeline._stage_records_python(finished, generators)
        assert built == expected, seed
        assert [vars(stage) for stage in built] == [vars(stage) for stage in expected]
    assert built and hash(built[0]) == hash(expected[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        built[0].name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError):
        build([(0, "auth", 1)], {}, StageRecord, fields)
    for seed in range(20):  # and decoding gives what the reference gives
        timeline = sample_timeline(random.Random(seed))
        record = decode(timeline.encode())
        assert record.stages == _timeline._stage_records_python(timeline.finished, timeline.generators)


def test_has_stage_finds_a_finished_stage_by_name_from_an_index(backend: Backend) -> None:
    timeline = backend.timeline(0)
    for stage in [(0, "auth", 1, 2, -1), (1, "llm_call", 3, 9, -1), (2, "upstream", 4, 8, 1)]:
        timeline.finished.append(stage)
    assert timeline.has_stage("auth") and timeline.has_stage("upstream", 2) and timeline.has_stage("upstream", 1)
    assert not timeline.has_stage("upstream", 3) and not timeline.has_stage("auth", 1)
    assert not timeline.has_stage("routing")
    timeline.finished = [(0, "auth", 1, 2, -1)]  # a list set in its place: read as the reference does
    assert timeline.has_stage("auth") and not timeline.has_stage("auth", 1)
