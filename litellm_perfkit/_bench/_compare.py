"""``perfkit compare``: deltas between bench runs, with bootstrap 95% intervals.

Samples are kept per repeat. Each bootstrap round (``ROUNDS``, seeded)
resamples the repeats with replacement, then the requests within each, and
recomputes the statistic (the median for latencies, the mean for stage
times and the overhead); the 2.5th and 97.5th percentiles of the difference
B - A form the interval. Resampling repeats first makes run-to-run
variation, which on a noisy machine is larger than the sampling noise within
a run, widen the interval: with fewer than 3 repeats per side the intervals
cannot see it, and the output says so. An interval that contains zero is
noise. RPS has no per-request samples: its interval comes from the repeats.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._wire._names import OUTSIDE_WALL_STAGES
from ..types import BenchResult, BenchRun

__all__ = ["Delta", "compare", "mean_delta", "render_compare", "CompareError", "ROUNDS"]

ROUNDS = 1000
Verdict = Literal["noise", "worse", "better", "n/a"]
Statistic = Callable[[Sequence[float]], float]


class CompareError(ValueError):
    pass


@dataclass(frozen=True)
class Delta:
    metric: str
    baseline: float
    candidate: float
    low: float | None  # 95% interval of candidate - baseline
    high: float | None
    verdict: Verdict
    higher_is_worse: bool

    @property
    def change(self) -> float:
        return self.candidate - self.baseline

    @property
    def relative(self) -> float | None:
        return self.change / self.baseline if self.baseline else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


Runs = Sequence[Sequence[float]]


def _resample(runs: Runs, rng: random.Random) -> list[float]:
    pooled: list[float] = []
    for _ in runs:
        run = runs[rng.randrange(len(runs))]
        pooled += rng.choices(run, k=len(run))
    return pooled


def bootstrap(a: Runs, b: Runs, statistic: Statistic, rounds: int = ROUNDS, seed: int = 1) -> tuple[float, float]:
    """95% interval of statistic(B) - statistic(A), resampling runs then requests."""
    rng = random.Random(seed)
    diffs = sorted(statistic(_resample(b, rng)) - statistic(_resample(a, rng)) for _ in range(rounds))
    return diffs[int(rounds * 0.025)], diffs[int(rounds * 0.975) - 1]


def _pool(runs: Runs) -> list[float]:
    return [value for run in runs for value in run]


def _runs(values: Any) -> Runs:
    """Per-repeat lists; a flat list (older results) is one run."""
    if values and not isinstance(values[0], (list, tuple)):
        return [values]
    return values or []


def _delta(
    metric: str, a: Any, b: Any, statistic: Statistic, higher_is_worse: bool, rounds: int = ROUNDS
) -> Delta | None:
    a, b = _runs(a), _runs(b)
    pooled_a, pooled_b = _pool(a), _pool(b)
    if not pooled_a or not pooled_b:
        return None
    base, cand = statistic(pooled_a), statistic(pooled_b)
    if len(pooled_a) < 2 or len(pooled_b) < 2:
        return Delta(metric, base, cand, None, None, "n/a", higher_is_worse)
    low, high = bootstrap(a, b, statistic, rounds)
    if low <= 0 <= high:
        verdict: Verdict = "noise"
    else:
        worse = (low > 0) == higher_is_worse
        verdict = "worse" if worse else "better"
    return Delta(metric, base, cand, low, high, verdict, higher_is_worse)


def mean_delta(metric: str, a: Runs, b: Runs) -> Delta | None:
    """The difference of two means, B - A, with its interval (per-repeat lists of per-request values)."""
    return _delta(metric, a, b, _mean, True)


def compare(baseline: BenchRun, candidate: BenchRun, rounds: int = ROUNDS) -> list[Delta]:
    a, b = baseline.get("samples"), candidate.get("samples")
    if not a or not b:
        raise CompareError("these results have no per-request samples; re-run them with this perfkit bench")
    median = statistics.median
    rows: list[Delta | None] = [
        # One value per repeat: each repeat is its own "run" of one sample.
        _delta("non-streaming RPS", [a["rps_repeats"]], [b["rps_repeats"]], median, False, rounds),
        _delta("latency p50 ms", a["nonstream_latency_ms"], b["nonstream_latency_ms"], median, True, rounds),
        _delta("streaming TTFT p50 ms", a["stream_ttft_ms"], b["stream_ttft_ms"], median, True, rounds),
        _delta("full stream p50 ms", a["stream_e2e_ms"], b["stream_e2e_ms"], median, True, rounds),
        _delta("streams/s", [a["streams_per_s_repeats"]], [b["streams_per_s_repeats"]], median, False, rounds),
        _delta(
            "server overhead mean ms",
            a.get("server_overhead_ms", []),
            b.get("server_overhead_ms", []),
            _mean,
            True,
            rounds,
        ),
    ]
    rows += _stage_deltas(a.get("stage_self_ms", {}), b.get("stage_self_ms", {}), "mean self ms", rounds)
    # CPU per stage: far steadier under load than wall time, which mixes in queueing.
    cpu_a, cpu_b = a.get("stage_cpu_ms") or {}, b.get("stage_cpu_ms") or {}
    if cpu_a and cpu_b:
        rows += _stage_deltas(cpu_a, cpu_b, "mean own CPU ms", rounds)
    return [row for row in rows if row is not None]


def _stage_deltas(a: Mapping[str, Runs], b: Mapping[str, Runs], what: str, rounds: int) -> list[Delta | None]:
    """One row per stage on either side, the largest first; a stage one side lacks counts as 0 there."""
    order = sorted(set(a) | set(b), key=lambda s: -_mean(_pool(a.get(s) or b.get(s) or [[0.0]])))
    return [
        _delta(f"stage {stage} ({what})", a.get(stage, [[0.0]]), b.get(stage, [[0.0]]), _mean, True, rounds)
        for stage in order
    ]


def repeat_counts(baseline: BenchRun | BenchResult, candidate: BenchRun | BenchResult) -> tuple[int, int]:
    """How many bench repeats each side's samples hold."""
    return len(baseline["samples"].get("rps_repeats", [])), len(candidate["samples"].get("rps_repeats", []))


def render_sweep(document: BenchResult) -> str | None:
    """A sweep's comparisons (its first run, the baseline, against each other
    run), or None when the document holds one run."""
    runs = document.get("runs") or []
    if len(runs) < 2:
        return None
    baseline = runs[0]
    parts = []
    for run in runs[1:]:
        parts.append(
            render_compare(_label(baseline), _label(run), compare(baseline, run), repeat_counts(baseline, run))
        )
    return "\n\n".join(parts)


def _label(run: BenchRun) -> str:
    version = run.get("litellm_version")
    named = run["target"] + (f" {version}" if version and version not in run["target"] else "")
    return f"{named} ({run['workers']} worker(s))"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def render_compare(label_a: str, label_b: str, deltas: list[Delta], repeats: tuple[int, int] = (3, 3)) -> str:
    lines = [
        f"{label_b} vs {label_a} (bootstrap 95% intervals of {label_b} - {label_a}; 'noise' when the interval contains 0)",
        "",
    ]
    if min(repeats) < 3:
        lines += [
            f"warning: {repeats[0]} and {repeats[1]} repeat(s): the intervals show the sampling noise within a run only. "
            "Separate runs of the same proxy differ by 10-15% on a busy machine; use perfkit bench --repeats 3 or more.",
            "",
        ]
    lines += [
        f"| metric | {label_a} | {label_b} | delta | delta % | 95% interval | verdict |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for d in deltas:
        relative = "n/a" if d.relative is None else f"{d.relative:+.1%}"
        interval = "n/a" if d.low is None else f"[{_fmt(d.low, 3)}, {_fmt(d.high, 3)}]"
        lines.append(
            f"| {d.metric} | {d.baseline:.3f} | {d.candidate:.3f} | {_fmt(d.change, 3)} | {relative} | {interval} | {d.verdict} |"
        )
    # A stage outside the request's wall time (before the app, after the response, the loop between steps) is
    # no part of its server overhead: it explains none of the overhead's change.
    stages = [
        d
        for d in deltas
        if d.metric.endswith("(mean self ms)") and d.verdict == "worse" and _stage_name(d) not in OUTSIDE_WALL_STAGES
    ]
    total = next((d for d in deltas if d.metric.startswith("server overhead")), None)
    if stages and total is not None and total.change:
        lines += ["", "stages that explain the change in server overhead:"]
        for d in sorted(stages, key=lambda d: -d.change):
            lines.append(f"  {_stage_name(d)}: {d.change:+.3f} ms ({d.change / total.change:.0%} of the total change)")
    cpu = [d for d in deltas if d.metric.endswith("(mean own CPU ms)") and d.verdict in ("worse", "better")]
    if cpu:
        lines += ["", "stages whose CPU per request changed (interval excludes 0):"]
        for d in sorted(cpu, key=lambda d: -abs(d.change)):
            lines.append(
                f"  {d.metric.removeprefix('stage ').removesuffix(' (mean own CPU ms)')}: {d.baseline:.3f} -> {d.candidate:.3f} ms ({d.change:+.3f} ms)"
            )
    return "\n".join(lines)


def _stage_name(delta: Delta) -> str:
    """The stage a per-stage metric is of ("stage auth (mean self ms)": auth)."""
    return delta.metric.removeprefix("stage ").removesuffix(" (mean self ms)")


def regressions(deltas: list[Delta], threshold: float) -> list[Delta]:
    """Real changes for the worse beyond ``threshold`` (a fraction) of the baseline."""
    return [d for d in deltas if d.verdict == "worse" and d.relative is not None and abs(d.relative) > threshold]
