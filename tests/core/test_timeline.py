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


def test_the_c_stage_builder_makes_the_dataclasses_the_python_one_makes() -> None:
    """Decoding builds StageRecords with the accelerator's ``instances`` (no
    ``__init__``): equal, still frozen, with the same instance layout."""
    import dataclasses

    import pytest

    from litellm_perfkit._core import _timeline
    from litellm_perfkit.types import StageRecord
    from tests.support.speedups import speedups

    fields = tuple(field.name for field in dataclasses.fields(StageRecord))
    rows = [("auth", 1, 5, -1, "block", 0, 0, ()), ("threads", 2, 4, 0, "thread", 1, 1, (2, 4, 1))]
    built = speedups().instances(StageRecord, fields, rows)
    assert built == _timeline._python_stages(rows)
    assert [vars(stage) for stage in built] == [vars(stage) for stage in _timeline._python_stages(rows)]
    assert built[1].duration_ns == 2 and hash(built[0]) == hash(StageRecord(*rows[0]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built[0].name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        speedups().instances(StageRecord, fields, [("auth", 1)])
    for seed in range(20):  # and decoding gives what the Python builder gives
        timeline = sample_timeline(random.Random(seed))
        record = decode(timeline.encode())
        assert record.stages == _timeline._python_stages([tuple(vars(stage).values()) for stage in record.stages])


def test_has_stage_finds_a_finished_stage_by_name_from_an_index(backend: Backend) -> None:
    timeline = backend.timeline(0)
    for stage in [(0, "auth", 1, 2, -1), (1, "llm_call", 3, 9, -1), (2, "upstream", 4, 8, 1)]:
        timeline.finished.append(stage)
    assert timeline.has_stage("auth") and timeline.has_stage("upstream", 2) and timeline.has_stage("upstream", 1)
    assert not timeline.has_stage("upstream", 3) and not timeline.has_stage("auth", 1)
    assert not timeline.has_stage("routing")
    timeline.finished = [(0, "auth", 1, 2, -1)]  # a list set in its place: read as the reference does
    assert timeline.has_stage("auth") and not timeline.has_stage("auth", 1)
