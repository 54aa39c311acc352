"""What ``perfkit bisect`` measures: one bench run per sample, and its drawing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

from ..types import BenchRun
from ._analysis import OUTSIDE_STAGES
from ._bisect import BisectResult, Sample, Unavailable
from ._options import BenchError, BenchOptions
from ._releases import release
from ._venvs import VenvError

__all__ = ["BISECT_BENCH", "METRIC", "METRICS", "Metric", "measure_with_bench", "render_bisect"]

BISECT_BENCH = BenchOptions(concurrency=8, duration_s=10.0, direct_duration_s=0.5, idle_s=0.0, label="bisect")
"""The bench of one sample, unless perfkit bisect's flags say otherwise: shorter
than perfkit bench's, and the baseline without the proxy, which bisect does
not compare, kept short."""

Metric = Literal["cpu", "rps", "streams", "ttft", "overhead"]


def _cpu(run: BenchRun) -> float | None:
    per_request = run["proxy"].get("cpu_ms_per_request") or {}
    return per_request.get("nonstream")


def _overhead(run: BenchRun) -> float | None:
    overhead = run["server_overhead_ms"]
    return None if overhead is None else overhead["p50"]


# name -> (what it is, unit, how to read it from a bench run)
METRICS: dict[Metric, tuple[str, str, Callable[[BenchRun], float | None]]] = {
    "cpu": ("the proxy's CPU per non-streaming request", "ms", _cpu),
    "rps": ("non-streaming requests per second", "req/s", lambda run: run["nonstream"]["rps"]),
    "streams": ("streams per second", "streams/s", lambda run: run["stream"]["streams_per_s"]),
    "ttft": ("streaming TTFT, p50", "ms", lambda run: run["stream"]["ttft_ms"]["p50"]),
    "overhead": ("the server-side overhead, p50", "ms", _overhead),
}
METRIC: Metric = "cpu"
"""What perfkit bisect bisects on unless told: the steadiest of them."""


def measure_with_bench(
    options: BenchOptions, package: str, metric: Metric, pip_args: list[str]
) -> Callable[[str], Sample]:
    """A sample of ``version``: one bench of it, with ``options``. Any package
    but LiteLLM runs through ``options.proxy_command`` ({python} is filled in)."""
    from ._experiment import run_bench

    read = METRICS[metric][2]

    def measure(version: str) -> Sample:
        try:
            where = release(package, version, pip_args, options.say)
        except VenvError as exc:
            raise Unavailable(str(exc)) from None
        if package == "litellm":
            asked = dataclasses.replace(options, litellm_versions=(version,))
        else:
            assert options.proxy_command is not None
            command = options.proxy_command.replace("{python}", str(where.python))
            asked = dataclasses.replace(options, proxy_command=command, proxy_env=tuple(where.env.items()))
        document = run_bench(asked)
        run: BenchRun = (document.get("runs") or [document])[0]
        value = read(run)
        if value is None:
            raise BenchError(f"{package} {version}: the bench gave no {METRICS[metric][0]}")
        return {"value": float(value), "stages": _stage_costs(run), "fast_paths": run["fast_paths"]}

    return measure


def _stage_costs(run: BenchRun) -> dict[str, float]:
    """Each stage's own CPU per request (and outside every stage), steadier
    than its wall time; its self time when the proxy has no step accounting."""
    stages = {name: s for name, s in run["stages"].items() if not s["upstream"]}
    if not stages or any(s.get("cpu_ms") is None for s in stages.values()):
        return {name: s["mean_self_ms"] for name, s in stages.items()}
    costs = {name: float(s["cpu_ms"] or 0.0) for name, s in stages.items()}
    remainder = run["remainder"]
    if remainder is not None and remainder.get("cpu_ms") is not None:
        costs[OUTSIDE_STAGES] = float(remainder["cpu_ms"] or 0.0)
    return costs


def render_bisect(result: BisectResult, versions: list[str], metric: Metric, package: str) -> str:
    """The releases measured (a bar per version, with its interval), then each change found."""
    what, unit, _ = METRICS[metric]
    lines = [f"{package}: {what} ({unit}), {len(versions)} releases from {versions[0]} to {versions[-1]}", ""]
    measured = result["measured"]
    top = max((mean + half for mean, half, _ in measured.values()), default=0.0) or 1.0
    for version in versions:
        if version not in measured:
            continue
        mean, half, n = measured[version]
        bar = "#" * max(1, round(40 * mean / top))
        lines.append(f"  {version:>14}  {mean:10.3f} +/- {half:<8.3f} ({n}x)  {bar}")
    lines.append("")
    drifts = result.get("drifts", [])  # journals written before drifts were reported have none
    if not result["changes"] and not result["unresolved"] and not drifts:
        lines.append(f"no release moved the metric by more than the noise between {versions[0]} and {versions[-1]}")
    for drift in drifts:
        low, high = drift["interval"]
        lines.append(
            f"drifted from {package} {drift['lower']} to {drift['upper']}: {drift['size']:+.3f} {unit} (interval {low:+.3f} to "
            f"{high:+.3f}), in steps each too small to tell from the noise; more samples (--max-samples) or a lower "
            "--min-change may resolve them"
        )
    for change in result["changes"]:
        low, high = change["interval"]
        relative = f" ({change['relative']:+.1%})" if change["relative"] is not None else ""
        skipped = versions.index(change["release"]) - versions.index(change["before"]) - 1
        where = (
            f"{change['release']} (after {change['before']})"
            if not skipped
            else f"{change['before']}..{change['release']} ({skipped} release(s) between could not be measured)"
        )
        lines.append(
            f"changed in {package} {where}: {change['size']:+.3f} {unit}{relative}, interval {low:+.3f} to {high:+.3f}"
        )
        moved = ", ".join(f"{name} {delta:+.3f} ms" for name, delta in change["stages"] if delta)
        if moved:
            lines.append(f"  stages (own CPU per request, or self time without step accounting): {moved}")
        for key, (before, after) in change["fast_paths"].items():
            lines.append(f"  fast path {key}: {before} -> {after}")
        if package == "litellm":
            lines.append(f"  changelog: https://github.com/BerriAI/litellm/releases/tag/v{change['release']}")
    for version, why in result["unavailable"].items():
        lines.append(f"not measured: {package} {version} ({why})")
    for low_version, high_version, between in result["unresolved"]:
        lines.append(
            f"not searched (budget spent): {low_version} to {high_version} ({between} release(s) between); rerun to resume"
        )
    return "\n".join(lines)
