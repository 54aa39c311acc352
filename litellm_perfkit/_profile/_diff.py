"""Differential profiles: which frames grew or shrank between two recordings.

Each side is one recording or several (repeats), as speedscope files
(sampled profiles: py-spy's, perfkit's stage profiles) or folded stacks.
Weights become milliseconds (samples at ``rate`` Hz when the file has no
time unit) and, when the requests each recording served are given,
milliseconds per request, so recordings of different lengths compare. Per
frame: its self time (its own samples) and its total time (samples with it
anywhere on the stack, counted once), on each side, the difference, its
share of the whole difference, and, with two or more recordings a side, a
95% interval of the difference from their spread.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["DiffError", "FrameDelta", "Recording", "diff", "load_recording", "render_diff", "write_diff"]

Stack = tuple[str, ...]


class DiffError(ValueError):
    """A recording that cannot be read; the message says which and why."""


@dataclass
class Recording:
    """Folded stacks of one recording, in milliseconds per request."""

    stacks: dict[Stack, float]

    def self_ms(self) -> dict[str, float]:
        own: dict[str, float] = defaultdict(float)
        for stack, ms in self.stacks.items():
            own[stack[-1]] += ms
        return own

    def total_ms(self) -> dict[str, float]:
        total: dict[str, float] = defaultdict(float)
        for stack, ms in self.stacks.items():
            for frame in set(stack):
                total[frame] += ms
        return total


def _frame_name(frame: dict[str, Any]) -> str:
    """A function and its file; not the line, which py-spy gives per sample
    (one function would become many frames)."""
    where = frame.get("file")
    return f"{frame.get('name', '?')} ({Path(where).name})" if where else str(frame.get("name", "?"))


_TO_MS = {"seconds": 1000.0, "milliseconds": 1.0, "microseconds": 0.001, "nanoseconds": 1e-6}


def _speedscope(document: dict[str, Any], path: Path, sample_ms: float) -> dict[Stack, float]:
    """In ms: weights in a time unit converted, unit-less weights (samples) at ``sample_ms`` each."""
    frames = [_frame_name(f) for f in document.get("shared", {}).get("frames", [])]
    stacks: dict[Stack, float] = defaultdict(float)
    for profile in document.get("profiles", []):
        if profile.get("type") != "sampled":
            raise DiffError(
                f"{path}: a speedscope {profile.get('type')!r} profile; give sampled profiles (py-spy's, perfkit's)"
            )
        scale = _TO_MS.get(profile.get("unit", "none"), sample_ms)
        for sample, weight in zip(profile["samples"], profile.get("weights") or [1] * len(profile["samples"])):
            if sample:
                stacks[tuple(frames[i] for i in sample)] += weight * scale
    return stacks


def _folded(text: str, path: Path, sample_ms: float) -> dict[Stack, float]:
    """In ms: each count is a sample of ``sample_ms``."""
    stacks: dict[Stack, float] = defaultdict(float)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        try:
            stacks[tuple(stack.split(";"))] += float(count) * sample_ms
        except ValueError:
            raise DiffError(f"{path}:{number}: not a folded stack line ('a;b;c COUNT')") from None
    return stacks


def load_recording(path: Path, requests: float | None, rate: int) -> Recording:
    """One recording, in ms per request (``requests`` given) or ms of samples at ``rate`` Hz."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DiffError(f"cannot read {path}: {exc.strerror}") from None
    sample_ms = 1000.0 / rate
    try:
        stacks = (
            _speedscope(orjson.loads(data), path, sample_ms)
            if data.lstrip()[:1] == b"{"
            else _folded(data.decode(), path, sample_ms)
        )
    except (orjson.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError) as exc:
        raise DiffError(f"{path}: not a speedscope file or folded stacks ({type(exc).__name__})") from None
    if not stacks:
        raise DiffError(f"{path}: no samples")
    per = requests or 1.0
    return Recording({stack: ms / per for stack, ms in stacks.items()})


@dataclass
class FrameDelta:
    frame: str
    self_a: float
    self_b: float
    total_a: float
    total_b: float
    share: float  # of all that moved: |self change| over the sum of every frame's |self change|
    interval: tuple[float, float] | None  # of the self-time difference, with repeats

    @property
    def self_delta(self) -> float:
        return self.self_b - self.self_a

    @property
    def total_delta(self) -> float:
        return self.total_b - self.total_a


def _interval(a: list[float], b: list[float]) -> tuple[float, float] | None:
    if len(a) < 2 or len(b) < 2:
        return None
    spread = 1.96 * math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    delta = statistics.fmean(b) - statistics.fmean(a)
    return round(delta - spread, 4), round(delta + spread, 4)


def diff(side_a: list[Recording], side_b: list[Recording]) -> tuple[list[FrameDelta], float, float]:
    """Per-frame deltas (largest self-time change first), and each side's mean total."""
    selfs_a, selfs_b = [r.self_ms() for r in side_a], [r.self_ms() for r in side_b]
    totals_a, totals_b = [r.total_ms() for r in side_a], [r.total_ms() for r in side_b]
    whole_a = statistics.fmean(sum(s.values()) for s in selfs_a)
    whole_b = statistics.fmean(sum(s.values()) for s in selfs_b)
    frames = set().union(*selfs_a, *selfs_b, *totals_a, *totals_b)
    deltas = []
    for frame in frames:
        a, b = [s.get(frame, 0.0) for s in selfs_a], [s.get(frame, 0.0) for s in selfs_b]
        deltas.append(
            FrameDelta(
                frame,
                statistics.fmean(a),
                statistics.fmean(b),
                statistics.fmean(t.get(frame, 0.0) for t in totals_a),
                statistics.fmean(t.get(frame, 0.0) for t in totals_b),
                0.0,
                _interval(a, b),
            )
        )
    moved = sum(abs(d.self_delta) for d in deltas)
    for d in deltas:
        d.share = abs(d.self_delta) / moved if moved else 0.0
    deltas.sort(key=lambda d: (-abs(d.self_delta), -abs(d.total_delta), d.frame))
    return deltas, whole_a, whole_b


def render_diff(deltas: list[FrameDelta], whole_a: float, whole_b: float, unit: str, top: int = 20) -> str:
    lines = [
        f"A {whole_a:.3f} {unit}, B {whole_b:.3f} {unit}: {whole_b - whole_a:+.3f} {unit}"
        + (f" ({(whole_b - whole_a) / whole_a:+.1%})" if whole_a else ""),
        "",
        "| frame | self A | self B | self change | share of what moved | 95% interval | total A | total B |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for d in deltas[:top]:
        interval = f"{d.interval[0]:+.3f} to {d.interval[1]:+.3f}" if d.interval else "(repeats needed)"
        lines.append(
            f"| {d.frame} | {d.self_a:.3f} | {d.self_b:.3f} | {d.self_delta:+.3f} | {d.share:.1%} | {interval} | "
            f"{d.total_a:.3f} | {d.total_b:.3f} |"
        )
    return "\n".join(lines)


def write_diff(side_a: list[Recording], side_b: list[Recording], speedscope: Path | None, folded: Path | None) -> None:
    """Folded stacks with both sides' weights ('stack A B', as difffolded.pl writes for
    flamegraph.pl), and a speedscope file with a profile of what grew and one of what shrank."""
    mean_a: dict[Stack, float] = defaultdict(float)
    mean_b: dict[Stack, float] = defaultdict(float)
    for side, into in ((side_a, mean_a), (side_b, mean_b)):
        for recording in side:
            for stack, ms in recording.stacks.items():
                into[stack] += ms / len(side)
    stacks = sorted(set(mean_a) | set(mean_b))
    if folded is not None:
        folded.write_text("".join(f"{';'.join(s)} {mean_a.get(s, 0.0):.6f} {mean_b.get(s, 0.0):.6f}\n" for s in stacks))
    if speedscope is not None:
        names = sorted({frame for stack in stacks for frame in stack})
        index = {name: n for n, name in enumerate(names)}

        def profile(name: str, sign: float) -> dict[str, Any]:
            picked = [(s, sign * (mean_b.get(s, 0.0) - mean_a.get(s, 0.0))) for s in stacks]
            picked = [(s, w) for s, w in picked if w > 0]
            return {
                "type": "sampled",
                "name": name,
                "unit": "milliseconds",
                "startValue": 0,
                "endValue": sum(w for _, w in picked),
                "samples": [[index[f] for f in s] for s, _ in picked],
                "weights": [w for _, w in picked],
            }

        document = {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "name": "perfkit profile diff (B - A)",
            "activeProfileIndex": 0,
            "exporter": "perfkit",
            "shared": {"frames": [{"name": n} for n in names]},
            "profiles": [
                profile("grew from A to B (ms per request)", 1.0),
                profile("shrank from A to B (ms per request)", -1.0),
            ],
        }
        speedscope.write_bytes(orjson.dumps(document))
