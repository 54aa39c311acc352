"""The result document (schema ``perfkit.load/1``, docs/metrics.md) and its table."""

from __future__ import annotations

import statistics

from .._version import __version__
from .._wire._names import LOAD_SCHEMA
from ..types import LoadConfig, LoadResult, LoadSummary, Percentiles
from ._exchange import ERROR_MESSAGES
from ._recorder import Recorder

__all__ = ["build_result", "render_table", "stopped", "SCHEMA"]

SCHEMA = LOAD_SCHEMA
# A driver that is late by more than this at p99, or busier than this share of
# one core, may have measured itself: the run is flagged.
LAG_FLAG_MS = 5.0
CPU_FLAG = 0.85


def build_result(
    recorder: Recorder, duration_s: float, cpu_s: float, wall_s: float, processes: int, config: LoadConfig
) -> LoadResult:
    h = recorder.histograms
    result: LoadResult = {
        "schema": "perfkit.load/1",
        "complete": True,
        "tool": {"name": "perfkit load", "version": __version__},
        "config": config,
        "summary": _summary(recorder, duration_s, cpu_s, wall_s, processes, config),
        "headers": _summaries_under(recorder, "header:"),
        "server_timing": _summaries_under(recorder, "server_timing:"),
        "ground_truth": {
            "gateway_added_ttft_ms": _summary_ms(recorder, "gateway_added_ttft"),
            "added_delay_per_chunk_ms": _summary_ms(recorder, "added_delay_per_chunk"),
        },
        "errors": {
            name: {
                "count": count,
                "meaning": ERROR_MESSAGES.get(name, name),
                "example": recorder.error_examples.get(name, ""),
            }
            for name, count in recorder.errors.items()
        },
        "histograms": {name: hist.to_dict() for name, hist in h.items()},
    }
    return result


def _summary_ms(recorder: Recorder, name: str) -> Percentiles | None:
    """The percentiles of one histogram, or None when it has no value."""
    h = recorder.histograms
    return h[name].summary_ms() if name in h and h[name].count else None


def _summaries_under(recorder: Recorder, prefix: str) -> dict[str, Percentiles]:
    """The percentiles of every histogram named ``prefix`` + a name, by that name."""
    return {
        name.removeprefix(prefix): hist.summary_ms()
        for name, hist in recorder.histograms.items()
        if name.startswith(prefix)
    }


def _summary(
    recorder: Recorder, duration_s: float, cpu_s: float, wall_s: float, processes: int, config: LoadConfig
) -> LoadSummary:
    """The run's counts, rates and latency percentiles, the driver's own load, and its flags."""
    streaming = bool(config.get("stream"))

    def summary(name: str) -> Percentiles | None:
        return _summary_ms(recorder, name)

    cpu_fraction = cpu_s / wall_s / processes if wall_s else 0.0
    sources = recorder.token_sources
    return {
        "requests": recorder.requests,
        "ok": recorder.ok,
        "errors": sum(recorder.errors.values()),
        "errors_by_class": dict(recorder.errors),
        "duration_s": round(duration_s, 3),
        "rps": round(recorder.ok / duration_s, 2) if duration_s else 0.0,
        "latency_ms": summary("latency"),
        "latency_uncorrected_ms": summary("latency_uncorrected"),
        "ttft_ms": summary("ttft") if streaming else None,
        "ttft_uncorrected_ms": summary("ttft_uncorrected") if streaming else None,
        "itl_ms": summary("itl") if streaming else None,
        "e2e_ms": summary("e2e") if streaming else None,
        "schedule_lag_ms": summary("schedule_lag"),
        "output_tokens": {
            "total": recorder.output_tokens,
            "per_s": round(recorder.output_tokens / duration_s, 2) if duration_s else 0.0,
            "source": "usage" if sources.get("usage", 0) >= sources.get("chunks", 0) and sources else "chunks",
        },
        "driver": {"processes": processes, "cpu_fraction": round(cpu_fraction, 3), "cpu_s": round(cpu_s, 3)},
        "flags": _flags(recorder, config, cpu_fraction, wall_s),
    }


def _flags(recorder: Recorder, config: LoadConfig, cpu_fraction: float, wall_s: float) -> list[str]:
    """Why the run's figures may not be the gateway's: a driver late or busy, failed requests."""
    lag = recorder.histograms.get("schedule_lag")
    lag_p99 = lag.percentile(99) / 1e6 if lag and lag.count else 0.0
    flags = []
    if config.get("mode") == "open" and lag_p99 > LAG_FLAG_MS:
        flags.append(
            f"driver fell behind its schedule: schedule lag p99 {lag_p99:.1f} ms (> {LAG_FLAG_MS:g} ms); add --processes"
        )
    if cpu_fraction > CPU_FLAG and wall_s >= 1:
        flags.append(f"driver CPU {cpu_fraction:.0%} of a core per process: it may be the bottleneck; add --processes")
    if recorder.errors:
        flags.append(f"{sum(recorder.errors.values())} requests failed")
    return flags


def median_run(results: list[LoadResult]) -> LoadResult:
    """The repeat with the median RPS, with every repeat's summary attached."""
    ordered = sorted(results, key=lambda r: r["summary"]["rps"])
    chosen = ordered[(len(ordered) - 1) // 2].copy()
    chosen["repeats"] = [r["summary"] for r in results]
    rps = [r["summary"]["rps"] for r in results]
    chosen["summary"] = {
        **chosen["summary"],
        "rps_spread": {"min": min(rps), "median": statistics.median(rps), "max": max(rps)},
    }
    return chosen


def stopped(result: LoadResult, signal: str) -> LoadResult:
    """The result of a run a signal stopped: what was measured until then, marked."""
    result["complete"] = False
    result["stopped_by"] = signal
    result["summary"]["flags"].append(f"stopped by {signal}: the numbers cover the run until then")
    return result


def render_table(result: LoadResult) -> str:
    s = result["summary"]
    rows = [
        ("requests", f"{s['requests']} ({s['errors']} errors)"),
        ("duration", f"{s['duration_s']:.2f} s"),
        ("throughput", f"{s['rps']:.1f} req/s"),
    ]

    def pct(name: str, data: Percentiles | None) -> None:
        if data:
            rows.append(
                (name, "p50 {p50:.2f}  p90 {p90:.2f}  p95 {p95:.2f}  p99 {p99:.2f}  max {max:.2f} ms".format(**data))
            )

    pct("latency", s["latency_ms"])
    pct("latency (uncorrected)", s["latency_uncorrected_ms"])
    pct("TTFT", s["ttft_ms"])
    pct("ITL", s["itl_ms"])
    pct("end-to-end", s["e2e_ms"])
    pct("schedule lag", s["schedule_lag_ms"])
    for name, data in result["headers"].items():
        pct(name, data)
    for name, data in result["server_timing"].items():
        pct(f"server-timing {name}", data)
    truth = result["ground_truth"]
    pct("gateway added ttft", truth["gateway_added_ttft_ms"])
    pct("added delay per chunk", truth["added_delay_per_chunk_ms"])
    tokens = s["output_tokens"]
    rows.append(("output tokens", f"{tokens['total']} ({tokens['per_s']:.1f}/s, from {tokens['source']})"))
    rows.append(
        ("driver", f"{s['driver']['processes']} process(es), CPU {s['driver']['cpu_fraction']:.0%} of a core each")
    )
    for name, info in result["errors"].items():
        rows.append((f"error {name}", f"{info['count']}: {info['meaning']}"))
    for flag in s["flags"]:
        rows.append(("warning", flag))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
