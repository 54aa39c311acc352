"""Join client records to server spans by trace id; where the overhead went.

Shares are ratios of means: a stage's mean exclusive time per request over
the mean server-side overhead per request. With the unattributed remainder
they add up to 1 exactly, because every request's overhead is the sum of its
stages' exclusive times and its remainder (docs/telemetry.md).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, TypedDict

from .._wire._names import (
    AFTER_RESPONSE_STAGE,
    EVENT_LOOP_STAGE,
    OUTSIDE_WALL_STAGES,
    PROTOCOL_STAGE,
    UPSTREAM_STAGES,
    Attr,
)
from ..types import AttributeValue, BenchStage, GcPauses, MeanP50P95, Remainder, Unmeasured

__all__ = [
    "OUTSIDE_STAGES",
    "Breakdown",
    "ServerSamples",
    "requests_cpu_per_request",
    "sampled_warning",
    "stage_breakdown",
    "percentile",
]

OUTSIDE_STAGES = "(outside every stage)"
"""The name the remainder goes by where it sits among the stages (CPU samples, tables)."""


class ServerSamples(TypedDict):
    server_overhead_ms: list[float]
    stage_self_ms: dict[str, list[float]]
    stage_cpu_ms: dict[str, list[float]]


class Breakdown(TypedDict):
    """Where one repeat's server-side overhead went, from its joined spans."""

    joined_requests: int
    unmeasured: Unmeasured
    stages: dict[str, BenchStage]
    remainder: Remainder | None
    gc_pause_ms: GcPauses | None
    server_overhead_ms: MeanP50P95 | None
    fast_paths: dict[str, AttributeValue]
    workers_seen: int | None
    samples: ServerSamples


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (exact for the sample)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


# Top-level stages outside the request's wall time whose CPU is the request's.
_OWN_OUTSIDE_WALL = (PROTOCOL_STAGE, AFTER_RESPONSE_STAGE, EVENT_LOOP_STAGE)


def requests_cpu_per_request(
    spans: list[dict[str, Any]], phases: dict[str, set[str]]
) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """Per phase, the mean CPU of its requests' own steps and thread calls,
    and the part of it inside named stages; (None, None) without step accounting."""
    # A request's own CPU: its split while it ran (the server span's), the
    # server's parsing of it (protocol), the app's after its last byte, its tasks' after the response
    # (after_response, which holds its thread calls' CPU) and, with
    # PERFKIT_STEPS=cpu, the event loop's between steps charged to it (event_loop).
    own: dict[str, float] = {}
    outside: dict[str, float] = {}
    outside_wall: dict[str, float] = defaultdict(float)
    for span in spans:
        if span["kind"] == 2 and Attr.CPU_MS in span["attrs"]:
            own[span["trace_id"]] = span["attrs"][Attr.CPU_MS]
            outside[span["trace_id"]] = span["attrs"].get(Attr.REMAINDER_CPU_MS, 0.0)
            # The app's own code after its last byte, outside the wall time and named.
            outside_wall[span["trace_id"]] += span["attrs"].get(Attr.AFTER_LAST_BYTE_CPU_MS, 0.0)
        elif span["kind"] == 1 and span["name"] in _OWN_OUTSIDE_WALL:
            outside_wall[span["trace_id"]] += span["attrs"].get(Attr.STAGE_CPU_MS, 0.0)
    totals: dict[str, list[float]] = defaultdict(list)
    named: dict[str, list[float]] = defaultdict(list)
    for trace_id, cpu in own.items():
        for name, trace_ids in phases.items():
            if trace_id in trace_ids:
                totals[name].append(cpu + outside_wall[trace_id])
                named[name].append(cpu + outside_wall[trace_id] - outside[trace_id])
    if not totals:
        return None, None
    return (
        {name: round(sum(v) / len(v), 4) for name, v in totals.items()},
        {name: round(sum(v) / len(v), 4) for name, v in named.items()},
    )


def sampled_warning(spans: list[dict[str, Any]], trace_ids: set[str], floor: float = 0.9) -> str | None:
    """A warning when fewer than ``floor`` of the requests sent came back with
    the gateway's server span: the stage table then describes a sample."""
    joined = len({span["trace_id"] for span in spans if span["kind"] == 2} & trace_ids)
    if not trace_ids or joined >= floor * len(trace_ids):
        return None
    return (
        f"warning: only {joined} of {len(trace_ids)} requests came back with the gateway's spans; the stage table describes that "
        "sample. A gateway behind --proxy-url records every request under perfkit run --record-rate all, and hands its spans "
        "over in time with OTEL_BSP_SCHEDULE_DELAY=200"
    )


Request = tuple[dict[str, Any], list[dict[str, Any]]]
"""One request's server span and every span of its trace."""


def stage_breakdown(spans: list[dict[str, Any]], trace_ids: set[str]) -> Breakdown:
    """Per-stage p50/p95 (inclusive, per request), share of the overhead, the
    remainder, the server-side overhead, and the fast-path attributes.
    Requests whose upstream perfkit could not measure are counted and left
    out: their overhead includes the provider's time."""
    joined = _joined_requests(spans, trace_ids)
    unmeasured: Unmeasured = {
        "upstream": sum(1 for server, _ in joined if server["attrs"].get(Attr.UPSTREAM_UNMEASURED)),
        "auth": sum(1 for server, _ in joined if server["attrs"].get(Attr.AUTH_UNMEASURED)),
    }
    requests = [(server, group) for server, group in joined if not server["attrs"].get(Attr.UPSTREAM_UNMEASURED)]
    if not requests:
        return _no_requests(unmeasured)
    n = len(requests)
    overhead = [server["attrs"].get(Attr.OVERHEAD_MS, 0.0) for server, _ in requests]
    remainder = [server["attrs"].get(Attr.UNATTRIBUTED_MS, 0.0) for server, _ in requests]
    gc_pause = [server["attrs"].get(Attr.GC_PAUSE_MS, 0.0) for server, _ in requests]
    times = _StageTimes(requests)
    splits = _Splits(requests)
    mean_overhead = sum(overhead) / n
    first = requests[0][0]["attrs"]
    return {
        "joined_requests": n,
        "unmeasured": unmeasured,
        "stages": _stage_rows(times, splits, n, mean_overhead),
        "remainder": {
            "mean_ms": round(sum(remainder) / n, 4),
            "share": round(sum(remainder) / n / mean_overhead, 4) if mean_overhead else None,
            **_split_means(splits.remainder if splits.requests else None, splits.requests),  # type: ignore[typeddict-item]
        },
        # Collector pauses overlap the stages and the remainder: a share of the
        # overhead to read beside them, not one more row of the 100%.
        "gc_pause_ms": {
            "mean": round(sum(gc_pause) / n, 4),
            "p95": round(percentile(gc_pause, 95), 4),
            "max": round(max(gc_pause), 4),
            "share": round(sum(gc_pause) / n / mean_overhead, 4) if mean_overhead else None,
        },
        "server_overhead_ms": {
            "mean": round(mean_overhead, 4),
            "p50": round(percentile(overhead, 50), 4),
            "p95": round(percentile(overhead, 95), 4),
        },
        "fast_paths": {
            k.removeprefix(Attr.LITELLM_PREFIX): v for k, v in first.items() if k.startswith(Attr.LITELLM_PREFIX)
        },
        "workers_seen": len({server.get("pid") for server, _ in requests}),
        "samples": _samples(overhead, times, splits),
    }


def _no_requests(unmeasured: Unmeasured) -> Breakdown:
    """The breakdown of a repeat none of whose requests could be measured."""
    return {
        "joined_requests": 0,
        "unmeasured": unmeasured,
        "stages": {},
        "remainder": None,
        "gc_pause_ms": None,
        "server_overhead_ms": None,
        "fast_paths": {},
        "workers_seen": None,
        "samples": {"server_overhead_ms": [], "stage_self_ms": {}, "stage_cpu_ms": {}},
    }


def _samples(overhead: list[float], times: _StageTimes, splits: _Splits) -> ServerSamples:
    """The per-request values behind the breakdown's figures (what perfkit compare resamples)."""
    return {
        "server_overhead_ms": [round(v, 4) for v in overhead],
        "stage_self_ms": {name: [round(v, 4) for v in values] for name, values in times.own_per_request.items()},
        "stage_cpu_ms": {name: [round(v, 4) for v in values] for name, values in splits.cpu_per_request.items()},
    }


def _joined_requests(spans: list[dict[str, Any]], trace_ids: set[str]) -> list[Request]:
    """The requests sent (``trace_ids``) whose server span came back, each with its trace's spans."""
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        if span["trace_id"] in trace_ids:
            by_trace[span["trace_id"]].append(span)
    servers = [next((s for s in group if s["kind"] == 2), None) for group in by_trace.values()]
    return [(server, group) for server, group in zip(servers, by_trace.values()) if server is not None]


class _StageTimes:
    """Per stage name: its inclusive time in each request that has it, and its own (self) time."""

    def __init__(self, requests: list[Request]) -> None:
        n = len(requests)
        self.durations: dict[str, list[float]] = defaultdict(list)
        self.own: dict[str, float] = defaultdict(float)
        self.own_per_request: dict[str, list[float]] = defaultdict(lambda: [0.0] * n)
        for number, (_, group) in enumerate(requests):
            per_request: dict[str, float] = defaultdict(float)
            for span in group:
                if span["kind"] != 1:
                    continue
                per_request[span["name"]] += span["attrs"].get(Attr.STAGE_DURATION_MS, 0.0)
                self_ms = span["attrs"].get(Attr.STAGE_SELF_MS, span["attrs"].get(Attr.STAGE_DURATION_MS, 0.0))
                self.own[span["name"]] += self_ms
                self.own_per_request[span["name"]][number] += self_ms
            for name, value in per_request.items():
                self.durations[name].append(value)


class _Splits:
    """The CPU, queueing and I/O wait of the requests that carry a split (step
    accounting): summed per stage name and outside every stage, and the CPU per request."""

    def __init__(self, requests: list[Request]) -> None:
        splits = [split for split in (_own_split(server, group) for server, group in requests) if split is not None]
        self.requests = len(splits)
        names = {name for own_parts, _ in splits for name in own_parts}
        self.own = {name: [sum(own.get(name, _ZERO)[i] for own, _ in splits) for i in range(3)] for name in names}
        self.remainder = [sum(outside[i] for _, outside in splits) for i in range(3)]
        self.cpu_per_request = {name: [own.get(name, _ZERO)[0] for own, _ in splits] for name in names}
        if splits:
            self.cpu_per_request[OUTSIDE_STAGES] = [outside[0] for _, outside in splits]


def _stage_rows(times: _StageTimes, splits: _Splits, n: int, mean_overhead: float) -> dict[str, BenchStage]:
    """One row per stage, the stages with the most own time first."""
    stages: dict[str, BenchStage] = {}
    for name, values in sorted(times.durations.items(), key=lambda item: -times.own[item[0]]):
        upstream = name in UPSTREAM_STAGES
        stages[name] = {
            "p50_ms": round(percentile(values, 50), 4),
            "p95_ms": round(percentile(values, 95), 4),
            "mean_self_ms": round(times.own[name] / n, 4),
            # The protocol work before the app and the work after the response are outside the request's overhead.
            "share": None
            if upstream or name in OUTSIDE_WALL_STAGES or not mean_overhead
            else round(times.own[name] / n / mean_overhead, 4),
            "requests": len(values),
            "upstream": upstream,
            **_split_means(splits.own.get(name), splits.requests),  # type: ignore[typeddict-item]
        }
    return stages


_SPLIT_KEYS = (Attr.STAGE_CPU_MS, Attr.STAGE_QUEUE_MS, Attr.STAGE_IO_MS)


_ZERO = (0.0, 0.0, 0.0)


def _own_split(
    server: dict[str, Any], group: list[dict[str, Any]]
) -> tuple[dict[str, list[float]], list[float]] | None:
    """One request's own CPU, queueing and I/O wait per stage name (a stage's
    minus its child stages'), and outside every stage; None when its spans carry no split."""
    attrs = server["attrs"]
    if Attr.CPU_MS not in attrs:
        return None
    inclusive = {s["span_id"]: [s["attrs"].get(key, 0.0) for key in _SPLIT_KEYS] for s in group if s["kind"] == 1}
    children: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for span in group:
        if span["kind"] == 1 and span["parent"] in inclusive:
            for i, value in enumerate(inclusive[span["span_id"]]):
                children[span["parent"]][i] += value
    own: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for span in group:
        if span["kind"] == 1:
            for i, value in enumerate(inclusive[span["span_id"]]):
                own[span["name"]][i] += max(0.0, value - children[span["span_id"]][i])
    outside = [attrs.get(key, 0.0) for key in (Attr.REMAINDER_CPU_MS, Attr.REMAINDER_QUEUE_MS, Attr.REMAINDER_IO_MS)]
    return own, outside


def _split_means(sums: list[float] | None, requests: int) -> dict[str, float | None]:
    """cpu_ms, queue_ms, io_ms: means per request; None without step accounting."""
    if not sums or not requests:
        return {"cpu_ms": None, "queue_ms": None, "io_ms": None}
    return {key: round(value / requests, 4) for key, value in zip(("cpu_ms", "queue_ms", "io_ms"), sums)}
