"""The master key against a virtual key, on the same proxy at the same time.

With a database the bench's load carries both keys, interleaved request by
request: each request's key follows from its trace id (``key_index``), so
the bench splits the joined requests by key without recording a key. Both
kinds then meet the same load, the same machine's drift and the same
proxy process. Each stage's own CPU per request is compared with
``perfkit compare``'s statistic: the difference of the means, virtual
minus master, with its bootstrap 95% interval (repeats resampled, then the
requests within them).
"""

from __future__ import annotations

from typing import Literal

from .._load._workload import key_index
from ..types import BenchKeys, BenchKeyStage
from ._analysis import Breakdown, stage_breakdown
from ._compare import mean_delta

__all__ = ["KEY_KINDS", "KeySplit", "by_key", "compare_keys"]

KEY_KINDS: tuple[Literal["master"], Literal["virtual"]] = ("master", "virtual")
"""The load's keys, in the order of ``BenchOptions.api_keys``."""

KeySplit = dict[str, Breakdown]
"""One repeat's breakdown per key kind."""

ALWAYS = ("auth",)
"""Stages compared whatever their interval: what a virtual key is expected to change."""


def by_key(spans: list[dict[str, object]], trace_ids: set[str]) -> KeySplit:
    """One repeat's joined requests, broken down per key kind."""
    kinds = {kind: {t for t in trace_ids if key_index(t, len(KEY_KINDS)) == i} for i, kind in enumerate(KEY_KINDS)}
    return {kind: stage_breakdown(spans, ids) for kind, ids in kinds.items()}


def compare_keys(splits: list[KeySplit]) -> BenchKeys:
    """Each stage's own CPU per request, virtual against master, over the repeats."""
    runs = {kind: [split[kind]["samples"]["stage_cpu_ms"] for split in splits] for kind in KEY_KINDS}
    names = sorted({name for kind in KEY_KINDS for run in runs[kind] for name in run})
    rows: list[BenchKeyStage] = []
    for name in names:
        master = [run.get(name, [0.0]) for run in runs["master"]]
        virtual = [run.get(name, [0.0]) for run in runs["virtual"]]
        delta = mean_delta(name, master, virtual)
        if delta is None or (name not in ALWAYS and delta.verdict in ("noise", "n/a")):
            continue
        rows.append(
            {
                "stage": name,
                "master_ms": round(delta.baseline, 4),
                "virtual_ms": round(delta.candidate, 4),
                "difference_ms": round(delta.change, 4),
                "low_ms": None if delta.low is None else round(delta.low, 4),
                "high_ms": None if delta.high is None else round(delta.high, 4),
                "verdict": delta.verdict,
            }
        )
    rows.sort(key=lambda row: (row["stage"] not in ALWAYS, -abs(row["difference_ms"])))
    requests = {kind: sum(split[kind]["joined_requests"] for split in splits) for kind in KEY_KINDS}
    return {"requests": requests, "stages": rows}
