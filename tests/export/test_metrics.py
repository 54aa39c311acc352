"""The histograms the export side keeps: a weighted sample's stages count every request it stands for."""

from __future__ import annotations

from litellm_perfkit._export._metrics import BOUNDARIES_NS, MetricStore
from litellm_perfkit.types import RequestRecord, StageRecord


def record(auth_ns: int, passed_by: int) -> RequestRecord:
    return RequestRecord(
        start_ns=0,
        end_ns=10_000_000,
        method="POST",
        path="/v1/chat/completions",
        status=200,
        passed_by=passed_by,
        stages=(StageRecord("auth", 1_000, 1_000 + auth_ns, -1),),
    )


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
