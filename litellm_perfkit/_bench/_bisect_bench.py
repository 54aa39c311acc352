"""What ``perfkit bisect`` measures: pairs of releases (``_pairs``), the functions
that moved in a release found (per-stage profiles, ``perfkit flamegraph
--diff``'s statistics), and its drawing."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from .._profile._diff import Recording, diff
from .._profile._stages import StageProfiler
from ._bisect_journal import BisectResult, FunctionMove
from ._options import BenchOptions
from ._pairs import PairMetric, PairReading, Sides, measure_pair
from ._releases import release
from ._venvs import VenvError

__all__ = [
    "BISECT_BENCH",
    "METRIC",
    "METRICS",
    "PROFILED_PAIRS",
    "measure_with_pairs",
    "prepare_release",
    "profile_functions",
    "render_bisect",
]

BISECT_BENCH = BenchOptions(concurrency=8, duration_s=8.0, warmup_s=5.0, idle_s=0.0, label="bisect")
"""A pair's load, unless perfkit bisect's flags say otherwise: 8 users, bursts of
about 0.5 s, 16 a side (``--duration`` 8 s), after a 5 s warm-up of each side (a fresh
proxy's first requests cost more: a short warm-up leaves that in the bursts)."""

# name -> (what it is, unit)
METRICS: dict[PairMetric, tuple[str, str]] = {
    "cpu": ("the proxy's CPU per non-streaming request", "ms"),
    "rps": ("non-streaming requests per second", "req/s"),
}
METRIC: PairMetric = "cpu"
"""What perfkit bisect bisects on unless told: the steadiest."""

PROFILED_PAIRS = 4
"""Profiled pairs per release found, whose spread gives a function's change its interval. A
3%-step's function gets a few dozen samples a side in a pair: with two pairs, their counting
noise alone put zero inside its interval on a loaded machine."""


def prepare_release(package: str, pip_args: list[str], say: Callable[[str], None]) -> Callable[[str], None]:
    """Installs a release (its cached venv), or raises Unavailable."""
    from ._pairs import Unavailable

    def prepare(version: str) -> None:
        try:
            release(package, version, pip_args, say)
        except VenvError as exc:
            raise Unavailable(version, str(exc)) from None

    return prepare


def measure_with_pairs(
    options: BenchOptions, package: str, pip_args: list[str], store: Callable[[str, str, PairReading], None]
) -> Callable[[str, str, Sides], PairReading]:
    """One pair of two releases, kept in ``store`` too (reused by later bisects and sweeps)."""

    def measure(lower: str, upper: str, first: Sides) -> PairReading:
        reading = measure_pair(options, package, (lower, upper), pip_args, first)
        store(lower, upper, reading)
        return reading

    return measure


def _profiler_frame(frame: dict[str, Any]) -> bool:
    """The per-stage profiler's own signal handler: on a stack, the sample is of the profiler's
    CPU (a SIGPROF met the handler still running), which grows with the stacks it walks."""
    handler = StageProfiler._sample.__code__
    return frame["name"] == handler.co_name and Path(frame["file"]).parts[-2:] == Path(handler.co_filename).parts[-2:]


def _stage_recordings(directory: Path, served: int) -> dict[str, Recording]:
    """Per stage, the side's per-stage profiles (every worker's file), in CPU ms per request served;
    the profiler's own samples left out."""
    stacks: dict[str, dict[tuple[str, ...], float]] = {}
    for path in sorted(directory.glob("*.speedscope.json")):
        document: dict[str, Any] = orjson.loads(path.read_bytes())
        shared = document["shared"]["frames"]
        frames = [f"{f['name']} ({Path(f['file']).name})" for f in shared]
        profiler = {i for i, f in enumerate(shared) if _profiler_frame(f)}
        for profile in document["profiles"]:
            into = stacks.setdefault(profile["name"], {})
            for sample, weight in zip(profile["samples"], profile["weights"]):
                if profiler.intersection(sample):
                    continue
                stack = tuple(frames[i] for i in sample)
                into[stack] = into.get(stack, 0.0) + weight * 1000 / served
    return {stage: Recording(found) for stage, found in stacks.items()}


def profile_functions(
    options: BenchOptions, package: str, pip_args: list[str], pairs: int = PROFILED_PAIRS
) -> Callable[[str, str, list[str]], list[FunctionMove]]:
    """For a release found: ``pairs`` pairs of it and the release before with the per-stage
    profiler on, then per stage asked, the functions whose self CPU per request moved
    beyond the spread of the pairs (``perfkit flamegraph --diff``'s statistics)."""

    def profile(lower: str, upper: str, stages: list[str]) -> list[FunctionMove]:
        sides: dict[str, list[dict[str, Recording]]] = {"lower": [], "upper": []}
        with tempfile.TemporaryDirectory(prefix="perfkit-bisect-profile-") as tmp:
            for number in range(pairs):
                dirs = (Path(tmp) / f"{number}-lower", Path(tmp) / f"{number}-upper")
                first: Sides = "lower" if number % 2 == 0 else "upper"
                reading = measure_pair(options, package, (lower, upper), pip_args, first, profile=dirs)
                sides["lower"].append(_stage_recordings(dirs[0], reading["lower"]["served"]))
                sides["upper"].append(_stage_recordings(dirs[1], reading["upper"]["served"]))
        moves: list[FunctionMove] = []
        empty = Recording({})
        for stage in stages:
            a = [recordings.get(stage, empty) for recordings in sides["lower"]]
            b = [recordings.get(stage, empty) for recordings in sides["upper"]]
            if not any(r.stacks for r in a + b):
                continue
            deltas, _, _ = diff(a, b)
            for delta in deltas[:3]:
                beyond = delta.interval is not None and (delta.interval[0] > 0 or delta.interval[1] < 0)
                if beyond:
                    moves.append(
                        {
                            "stage": stage,
                            "function": delta.frame,
                            "before_ms": round(delta.self_a, 4),
                            "after_ms": round(delta.self_b, 4),
                            "change_ms": round(delta.self_delta, 4),
                            "interval": delta.interval,
                        }
                    )
        return moves

    return profile


def render_bisect(result: BisectResult, versions: list[str], package: str) -> str:
    """The curve (each comparison with its interval and the smallest step it resolves), then each change found."""
    what, unit = METRICS[result["metric"]]
    resolution = result["resolution"]
    lines = [
        f"{package}: {what} ({unit}), {len(versions)} releases from {versions[0]} to {versions[-1]}, in pairs",
        f"resolution (the smallest step a comparison resolves at 95%): {resolution['before']:.1%} before the run"
        + ("" if resolution["before_measured"] else " (pair noise assumed)")
        + f", {resolution['after']:.1%} after it with {resolution['pairs']} pairs (pair noise {resolution['noise']:.1%}, "
        f"{resolution['freedom']} degrees of freedom)",
        "",
        f"  {'from':>12} {'to':>12} {'between':>7}  {'ratio':>6}  {'95% interval':<16} {'resolves':>8} {'pairs':>5}"
        f"  {'difference (' + unit + ')':<22}",
    ]
    cumulative = 1.0
    for step in result["curve"]:
        cumulative *= step["ratio"]
        low, high = step["interval"]
        moved = "step" if low > 1 or high < 1 else ""
        lines.append(
            f"  {step['lower']:>12} {step['upper']:>12} {step['between']:>7}  {step['ratio']:6.3f}  "
            f"[{low:.3f}, {high:.3f}]   {step['resolution']:>7.1%} {step['pairs']:>5}  "
            f"{step['difference']:+.3f} [{step['difference_interval'][0]:+.3f}, {step['difference_interval'][1]:+.3f}]"
            f"  {moved}"
        )
    whole = result["whole"]
    if whole is not None:
        lines.append(
            f"  the ends compared: {whole['upper']} / {whole['lower']} {whole['ratio']:.3f} "
            f"[{whole['interval'][0]:.3f}, {whole['interval'][1]:.3f}], {whole['difference']:+.3f} {unit}, {whole['pairs']} pairs"
        )
    if result["curve"]:
        # The curve tiles the range only when the search ended: a range the budget left is a gap in it.
        gaps = [f"{low} to {high}" for low, high, _ in result["unresolved"]]
        lines.append(
            f"  the steps multiply to {cumulative:.3f} from {result['curve'][0]['lower']} to {result['curve'][-1]['upper']}"
            + (f", without {', '.join(gaps)} (not compared, below)" if gaps else "")
        )
    lines.append("")
    if not result["changes"] and not result["complete"]:
        lines.append(
            f"no release named between {versions[0]} and {versions[-1]} yet: the budget ran out before the search ended"
        )
    elif not result["changes"]:
        lines.append(
            f"no single release moved the metric beyond its interval between {versions[0]} and {versions[-1]}"
            + ("; the curve above shows where it moved" if any(s["ratio"] != 1 for s in result["curve"]) else "")
        )
    for change in result["changes"]:
        low, high = change["interval"]
        where = (
            f"{change['upper']} (after {change['lower']})"
            if not change["between"]
            else f"{change['lower']}..{change['upper']} ({change['between']} release(s) between could not be measured)"
        )
        lines.append(
            f"changed in {package} {where}: x{change['ratio']:.3f} [{low:.3f}, {high:.3f}], "
            f"{change['difference']:+.3f} {unit} per request"
        )
        for name, delta, (d_low, d_high) in change["stages"]:
            lines.append(f"  stage {name}: own CPU {delta:+.3f} ms per request [{d_low:+.3f}, {d_high:+.3f}]")
        for move in change["functions"]:
            interval = move["interval"]
            lines.append(
                f"    function {move['function']} in {move['stage']}: {move['before_ms']:.3f} -> {move['after_ms']:.3f} ms "
                f"per request ({move['change_ms']:+.3f}"
                + (f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else "")
                + ")"
            )
        for key, (before, after) in change["fast_paths"].items():
            lines.append(f"  fast path {key}: {before} -> {after}")
        if package == "litellm":
            lines.append(f"  changelog: https://github.com/BerriAI/litellm/releases/tag/v{change['upper']}")
    for version, why in result["unavailable"].items():
        lines.append(f"not measured: {package} {version} ({why})")
    for low_version, high_version, between in result["unresolved"]:
        lines.append(
            f"not compared (budget spent): {low_version} to {high_version} ({between} release(s) between); rerun to resume"
        )
    return "\n".join(lines)
