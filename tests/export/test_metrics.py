"""The histograms the export side keeps: a weighted sample's stages, overhead and collector pauses count every request it stands for."""

from __future__ import annotations

import random
from bisect import bisect_left
from typing import Any

import pytest

from litellm_perfkit._export._metrics import BOUNDARIES_NS, MetricStore, _observe_stages_python, _PyHistogram
from litellm_perfkit.types import RequestRecord, StageRecord
from tests.support.speedups import speedups


def chat(end_ns: int, **fields: Any) -> RequestRecord:
    """A chat completion answered 200, ``end_ns`` after it began; ``fields`` set the rest."""
    return RequestRecord(start_ns=0, end_ns=end_ns, method="POST", path="/v1/chat/completions", status=200, **fields)


def record(auth_ns: int, passed_by: int) -> RequestRecord:
    return chat(10_000_000, passed_by=passed_by, stages=(StageRecord("auth", 1_000, 1_000 + auth_ns, -1),))


def test_a_stage_histogram_adds_each_records_weight() -> None:
    store = MetricStore()
    # A quiet period's requests recorded one by one (fast auth), and one that stands for 99 of a busy period's (slow).
    for _ in range(10):
        store.observe(record(20_000, 0))
    store.observe(record(4_000_000, 98))
    [auth] = [h for (name, attributes), h in store.snapshot() if name == "perfkit.stage.duration"]
    assert auth.count == 10 + 99
    assert auth.total_ns == 10 * 20_000 + 99 * 4_000_000
    fast = next(i for i, bound in enumerate(BOUNDARIES_NS) if bound >= 20_000)
    slow = next(i for i, bound in enumerate(BOUNDARIES_NS) if bound >= 4_000_000)
    assert auth.counts[fast] == 10 and auth.counts[slow] == 99
    assert (auth.minimum_ns, auth.maximum_ns) == (20_000, 4_000_000)


def test_the_overhead_and_collector_histograms_add_each_records_weight() -> None:
    store = MetricStore()
    quiet = chat(2_000_000, gc_pause_ns=0)
    busy = chat(9_000_000, gc_pause_ns=5_000_000, passed_by=41)
    for _ in range(3):
        store.observe(quiet)
    store.observe(busy)
    histograms = {name: h for (name, _), h in store.snapshot()}
    overhead, paused = histograms["perfkit.request.overhead"], histograms["perfkit.gc.pause"]
    assert overhead.count == paused.count == 3 + 42
    assert overhead.total_ns == 3 * 2_000_000 + 42 * 9_000_000
    assert paused.total_ns == 42 * 5_000_000
    assert paused.counts[0] == 3 and paused.counts[bisect_left(BOUNDARIES_NS, 5_000_000)] == 42


def test_a_records_duration_and_first_token_are_the_tallys_not_added_again() -> None:
    """The request families count every request once, from the traffic tally; a
    record (whatever its weight) adds nothing to them."""
    store = MetricStore()
    store.observe(chat(9_000_000, streaming=True, marks={"first_token": 3_000_000}, passed_by=41))
    names = {name for (name, _), _ in store.snapshot()}
    assert names == {"perfkit.request.overhead", "perfkit.gc.pause"}


def _members(histogram: Any) -> tuple[Any, ...]:
    return (histogram.count, histogram.total_ns, histogram.minimum_ns, histogram.maximum_ns, histogram.counts)


def test_the_c_histogram_records_copies_and_is_set_as_the_python_reference() -> None:
    """Random values and weights, bucket bounds themselves, and totals past 2**63 (a busy proxy's weighted
    stage durations pass int64 within weeks): the C type folds them into an int, as Python's does."""
    c_histogram = speedups().Histogram
    rng = random.Random(7)
    values = [*BOUNDARIES_NS, *(b + 1 for b in BOUNDARIES_NS), 0, -5, 2**62, 2**63 - 1]
    values += [rng.randrange(0, 1 << rng.randrange(1, 62)) for _ in range(2_000)]
    python, c = _PyHistogram(), c_histogram()
    assert _members(c) == _members(python)
    for value in values:
        weight = rng.choice((1, 1, 7, 2**40))
        python.record(value, weight)
        c.record(value, weight)
        assert _members(c) == _members(python), (value, weight)
    assert python.total_ns > 2**63
    twin = c.copy()
    c.record(5)
    assert _members(twin) == _members(python) and type(twin) is c_histogram
    # The traffic tally's parts are set member by member (_traffic._histogram), a total past int64 too.
    for histogram in (python, c):
        histogram.count, histogram.total_ns, histogram.minimum_ns, histogram.maximum_ns = 3, 2**70, 1, 9
        histogram.counts = list(range(len(BOUNDARIES_NS) + 1))
    assert _members(c) == _members(python)
    c.total_ns = 12
    assert c.total_ns == 12
    with pytest.raises(ValueError, match="one count a bucket"):
        c.counts = [1, 2]
    with pytest.raises(OverflowError):
        c.record(2**64)


def test_the_c_observe_stages_adds_as_the_python_reference() -> None:
    speeds = speedups()
    stages = tuple(StageRecord(name, 0, 0, -1) for name in ("auth", "routing", "auth", "upstream"))
    durations = [20_000, 3_000, 7_000_000, 40_000_000]
    kept: dict[str, list[dict[str, Any]]] = {"c": [], "python": []}
    for which, histogram, observe in (
        ("python", _PyHistogram, _observe_stages_python),
        ("c", speeds.Histogram, speeds.observe_stages),
    ):
        by_name: dict[str, Any] = {}
        made: list[str] = []

        def make(name: str, by_name: dict[str, Any] = by_name, made: list[str] = made, cls: Any = histogram) -> Any:
            made.append(name)
            by_name[name] = cls()
            return by_name[name]

        observe(by_name, stages, durations, 3, make)
        observe(by_name, stages, durations, 1, make)
        assert made == ["auth", "routing", "upstream"]  # each name made once, when it first came
        kept[which] = [{name: _members(h)} for name, h in sorted(by_name.items())]
    assert kept["c"] == kept["python"]
    with pytest.raises(ValueError, match="one duration a stage"):
        speeds.observe_stages({}, stages, durations[:1], 1, dict)
    with pytest.raises(TypeError, match="not a Histogram"):
        speeds.observe_stages({"auth": _PyHistogram()}, stages[:1], durations[:1], 1, dict)
