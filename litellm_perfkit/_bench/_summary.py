"""One target's repeats, summarized into the result document's run (``types.BenchRun``)."""

from __future__ import annotations

import statistics
from typing import TypedDict

from .._wire._names import LITELLM_OVERHEAD_HEADER
from ..types import (
    P50P95,
    BenchCostSide,
    BenchNonStream,
    BenchRun,
    BenchSamples,
    BenchSpread,
    BenchStream,
    IdleOverhead,
    LoadResult,
    LoadSummary,
    Percentiles,
    ProxyUsage,
)
from ._analysis import Breakdown

__all__ = ["Repeat", "Rounds", "Samples", "summarize"]


class Samples(TypedDict):
    """One repeat's per-request client values (ms)."""

    nonstream_latency_ms: list[float]
    stream_ttft_ms: list[float]
    stream_e2e_ms: list[float]


class Idle(TypedDict):
    """The idle phase: one user on a proxy with nothing else to do."""

    summary: LoadSummary
    breakdown: Breakdown


class Rounds(TypedDict):
    """One phase of one repeat with the plain headline: each proxy's totals and the rounds' (plain, recorded) pairs."""

    burst_requests: int
    plain: BenchCostSide
    recorded: BenchCostSide
    cpu_pairs: list[tuple[float, float]] | None  # None without /proc
    rps_pairs: list[tuple[float, float]]


class _RepeatFields(TypedDict):
    nonstream: LoadResult
    stream: LoadResult
    samples: Samples
    proxy: ProxyUsage
    breakdown: Breakdown


class Repeat(_RepeatFields, total=False):
    """One repeat of the proxy's phases, joined to its spans."""

    sends: list[tuple[float, int | None]]  # each measured request's send time (unix s) and status
    by_key: dict[str, Breakdown]  # with two keys interleaved: the breakdown per key kind
    cost: dict[str, Rounds]  # with the plain headline: perfkit's cost, by phase


def _p50_p95(data: Percentiles | None) -> P50P95:
    return {"p50": data["p50"] if data else None, "p95": data["p95"] if data else None}


def _added(proxied: Percentiles | None, direct: Percentiles | None) -> dict[str, float]:
    if not proxied or not direct:
        return {}
    return {"p50": round(proxied["p50"] - direct["p50"], 3), "p95": round(proxied["p95"] - direct["p95"], 3)}


def _version(seen: object, asked: str | None) -> str | None:
    """The version the proxy's spans report, else the one asked for."""
    return str(seen) if seen is not None else asked


def _samples(repeats: list[Repeat]) -> BenchSamples:
    """Per-request values of every repeat, kept apart (perfkit compare resamples
    runs, then requests, so run-to-run variation widens its intervals)."""
    server = [repeat["breakdown"]["samples"] for repeat in repeats]
    stages = sorted({name for s in server for name in s["stage_self_ms"]})
    cpu_stages = sorted({name for s in server for name in s.get("stage_cpu_ms", {})})
    return {
        "nonstream_latency_ms": [r["samples"]["nonstream_latency_ms"] for r in repeats],
        "stream_ttft_ms": [r["samples"]["stream_ttft_ms"] for r in repeats],
        "stream_e2e_ms": [r["samples"]["stream_e2e_ms"] for r in repeats],
        "server_overhead_ms": [s["server_overhead_ms"] for s in server],
        "stage_self_ms": {name: [s["stage_self_ms"].get(name, [0.0]) for s in server] for name in stages},
        "stage_cpu_ms": {name: [s.get("stage_cpu_ms", {}).get(name, [0.0]) for s in server] for name in cpu_stages},
        "rps_repeats": [r["nonstream"]["summary"]["rps"] for r in repeats],
        "streams_per_s_repeats": [r["stream"]["summary"]["rps"] for r in repeats],
    }


def _idle(idle: Idle | None, direct: LoadSummary) -> IdleOverhead | None:
    if idle is None:
        return None
    latency = idle["summary"]["latency_ms"]
    return {
        "requests": idle["summary"]["requests"],
        "latency_ms": _p50_p95(latency),
        "client_overhead_ms": _added(latency, direct["latency_ms"]),
        "server_overhead_ms": idle["breakdown"]["server_overhead_ms"],
    }


def _spread(repeats: list[Repeat]) -> BenchSpread:
    """The least, median and greatest rate of the repeats, non-streaming and streaming."""
    rps = [r["nonstream"]["summary"]["rps"] for r in repeats]
    streams = [r["stream"]["summary"]["rps"] for r in repeats]
    return {
        "rps": {"min": min(rps), "median": statistics.median(rps), "max": max(rps)},
        "streams_per_s": {"min": min(streams), "median": statistics.median(streams), "max": max(streams)},
    }


def _nonstream(phase: LoadResult, direct: LoadSummary) -> BenchNonStream:
    """The non-streaming phase through the proxy, and what the proxy added to the direct latency."""
    summary = phase["summary"]
    lat = summary["latency_ms"]
    litellm_header = phase["headers"].get(LITELLM_OVERHEAD_HEADER)
    return {
        "rps": summary["rps"],
        "latency_ms": {
            "p50": lat["p50"] if lat else None,
            "p95": lat["p95"] if lat else None,
            "p99": lat["p99"] if lat else None,
        },
        "client_overhead_ms": _added(lat, direct["latency_ms"]),
        "litellm_overhead_header_ms": _p50_p95(litellm_header) if litellm_header else None,
        "errors": summary["errors"],
    }


def _stream(summary: LoadSummary, direct: LoadSummary) -> BenchStream:
    """The streaming phase through the proxy, and what the proxy added to the direct TTFT."""
    return {
        "ttft_ms": _p50_p95(summary["ttft_ms"]),
        "ttft_added_ms": _added(summary["ttft_ms"], direct["ttft_ms"]),
        "full_stream_ms": _p50_p95(summary["e2e_ms"]),
        "streams_per_s": summary["rps"],
        "errors": summary["errors"],
    }


def summarize(
    target: str,
    version: str | None,
    workers: int,
    direct: dict[str, LoadSummary],
    repeats: list[Repeat],
    flamegraph: str | None,
    idle: Idle | None,
) -> BenchRun:
    """The median repeat (by non-streaming RPS), with the spread and samples of every repeat."""
    median = sorted(repeats, key=lambda r: r["nonstream"]["summary"]["rps"])[(len(repeats) - 1) // 2]
    dns, dst = direct["nonstream"], direct["stream"]
    breakdown = median["breakdown"]
    run: BenchRun = {
        "target": target,
        "litellm_version": _version(breakdown["fast_paths"].get("version"), version),
        "workers": workers,
        "repeats": len(repeats),
        "spread": _spread(repeats),
        "nonstream": _nonstream(median["nonstream"], dns),
        "stream": _stream(median["stream"]["summary"], dst),
        "direct": {"latency_ms": _p50_p95(dns["latency_ms"]), "ttft_ms": _p50_p95(dst["ttft_ms"]), "rps": dns["rps"]},
        "server_overhead_ms": breakdown["server_overhead_ms"],
        "stages": breakdown["stages"],
        "remainder": breakdown["remainder"],
        "gc_pause_ms": breakdown["gc_pause_ms"],
        "fast_paths": breakdown["fast_paths"],
        "joined_requests": breakdown["joined_requests"],
        "unmeasured": breakdown["unmeasured"],
        "workers_seen": breakdown["workers_seen"],
        "proxy": median["proxy"],
        "idle": _idle(idle, direct["nonstream"]),
        "driver": {
            "name": median["nonstream"]["config"].get("driver", "perfkit"),
            **median["nonstream"]["summary"]["driver"],
        },
        "samples": _samples(repeats),
        "flamegraph": flamegraph,
    }
    if "locust" in median["nonstream"] and "locust" in median["stream"]:
        run["locust"] = {"nonstream": median["nonstream"]["locust"], "stream": median["stream"]["locust"]}
    return run
