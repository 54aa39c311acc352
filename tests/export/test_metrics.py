"""The histograms the export side keeps: a weighted sample's stages, overhead and collector pauses count every request it stands for."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from litellm_perfkit._export._metrics import BOUNDARIES_NS, MetricStore
from litellm_perfkit.types import RequestRecord, StageRecord


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
