"""``perfkit bisect``: the releases where a metric moved, found with intervals.

The search is pure: it asks ``measure(version)`` for samples and keeps them
in a journal, so it runs the same against the real bench and a fake one, and
a rerun resumes where the journal ends.

A range is searched when its two ends differ, by a two-sample test on the
means (the noise is pooled over every version measured, with Student's t for
its degrees of freedom, so a version measured twice still has an honest
interval); ends that are not clearly apart are measured again, up to
``max_samples``. A range that differs is split in two and both halves are
searched, so a regression that came in several steps is found step by step;
a release is named when it differs from the one before it, confirmed with
one more sample of each.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import orjson

from ..types import AttributeValue

__all__ = [
    "BISECT_SCHEMA",
    "MAX_SAMPLES",
    "MIN_CHANGE",
    "MIN_SAMPLES",
    "Bisection",
    "BisectResult",
    "Change",
    "Journal",
    "Sample",
    "Unavailable",
    "bisect",
    "releases_between",
]

BISECT_SCHEMA = "perfkit.bisect/1"
# The search's defaults, here once for bisect() and perfkit bisect's flags.
MIN_SAMPLES = 2  # samples of a release at least
MAX_SAMPLES = 4  # at most, while it is unclear which end it looks like
MIN_CHANGE = 0.05  # the smallest change worth naming, relative
# Student's t, two-sided 99%, by degrees of freedom: a search makes many
# comparisons, and a noise estimate from few samples must not split hairs.
_T99 = (
    (1, 63.66),
    (2, 9.92),
    (3, 5.84),
    (4, 4.60),
    (5, 4.03),
    (6, 3.71),
    (8, 3.36),
    (10, 3.17),
    (15, 2.95),
    (20, 2.85),
    (30, 2.75),
)
_Z99 = 2.58


def _t(freedom: int) -> float:
    for limit, value in _T99:
        if freedom <= limit:
            return value
    return _Z99


class Unavailable(Exception):
    """``measure`` cannot measure this release (it does not install here): the search goes around it."""


class Sample(TypedDict):
    """One measurement of one version."""

    value: float
    stages: dict[str, float]  # own CPU per request (ms) per stage; self time without step accounting
    fast_paths: dict[str, AttributeValue]


class Change(TypedDict):
    """A release where the metric moved: from the release before it to it."""

    before: str
    release: str
    size: float  # metric(release) - metric(before)
    interval: tuple[float, float]
    relative: float | None  # size / metric(before)
    stages: list[tuple[str, float]]  # stages whose own CPU (or self time) moved most, ms per request
    fast_paths: dict[str, tuple[AttributeValue | None, AttributeValue | None]]


class Drift(TypedDict):
    """A range whose ends differ though neither half does: the metric moved
    across it in steps each too small to tell from the noise."""

    lower: str
    upper: str
    size: float
    interval: tuple[float, float]


class BisectResult(TypedDict):
    changes: list[Change]
    drifts: list[Drift]
    unresolved: list[
        tuple[str, str, int]
    ]  # (lower, upper, releases between): ranges not searched when the budget ran out
    measured: dict[str, tuple[float, float, int]]  # version -> (mean, half-width of its interval, samples)
    complete: bool
    unavailable: dict[str, str]  # releases that could not be measured, and why


@dataclass
class Journal:
    """Every measurement, kept on disk after each one: a rerun resumes from it."""

    path: Path | None
    settings: dict[str, Any]
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)  # version -> why it cannot be measured
    result: BisectResult | None = None

    @classmethod
    def open(cls, path: Path | None, settings: dict[str, Any]) -> Journal:
        """The journal at ``path``, if it was made with the same settings; a new one otherwise."""
        if path is not None and path.exists():
            try:
                data = orjson.loads(path.read_bytes())
            except orjson.JSONDecodeError:
                raise ValueError(
                    f"{path} is not a perfkit bisect journal (not JSON); remove it or choose another --out"
                ) from None
            if not isinstance(data, dict) or data.get("schema") != BISECT_SCHEMA:
                raise ValueError(
                    f"{path} is not a perfkit bisect journal ({BISECT_SCHEMA}); remove it or choose another --out"
                )
            if data.get("settings") != settings:
                changed = sorted(k for k in settings if data.get("settings", {}).get(k) != settings[k])
                raise ValueError(
                    f"{path} was made with other settings ({', '.join(changed)}); use them, or another --out"
                )
            journal = cls(path, settings, data.get("samples", {}), data.get("unavailable", {}))
            journal._stored_result = data.get("result")
            return journal
        return cls(path, settings)

    _stored_result: BisectResult | None = field(default=None, repr=False)

    def load_result(self) -> BisectResult | None:
        """The answer an earlier run wrote, if it got that far."""
        return self._stored_result

    def add(self, version: str, sample: Sample) -> None:
        self.samples.setdefault(version, []).append(sample)
        self.save()

    def save(self) -> None:
        if self.path is not None:
            document = {
                "schema": BISECT_SCHEMA,
                "settings": self.settings,
                "samples": self.samples,
                "unavailable": self.unavailable,
                "result": self.result,
            }
            self.path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))


class Bisection:
    """The statistics over what the journal holds. Two versions differ when
    their means are apart by more than the noise explains and by at least
    ``min_change`` of the lower one's (a regression worth a search)."""

    def __init__(self, journal: Journal, min_change: float = 0.0) -> None:
        self.journal = journal
        self.min_change = min_change

    def values(self, version: str) -> list[float]:
        return [s["value"] for s in self.journal.samples.get(version, [])]

    def mean(self, version: str) -> float:
        return statistics.fmean(self.values(version))

    def _pooled(self) -> tuple[float, int]:
        """(relative standard deviation of one sample, its degrees of freedom),
        pooled over every version with two or more samples. Relative: the
        noise of CPU time and throughput grows with their level, so a slow
        release's runs spread more, in ms, than a fast one's."""
        squares, freedom = 0.0, 0
        for version in self.journal.samples:
            values = self.values(version)
            if len(values) >= 2:
                mean = statistics.fmean(values)
                if mean:
                    squares += sum((v / mean - 1) ** 2 for v in values)
                    freedom += len(values) - 1
        return (math.sqrt(squares / freedom), freedom) if freedom else (0.0, 0)

    def _spread(self, *versions: str) -> float:
        """Half the width of the interval of a mean (one version) or of a difference of two."""
        relative, freedom = self._pooled()
        if not freedom:
            return math.inf
        return _t(freedom) * relative * math.sqrt(sum(self.mean(v) ** 2 / len(self.values(v)) for v in versions))

    def half_width(self, version: str) -> float:
        return self._spread(version)

    def separated(self, a: str, b: str) -> bool:
        """The two means differ by more than their noise explains, and by at least min_change."""
        apart = abs(self.mean(a) - self.mean(b))
        return apart > self._spread(a, b) and apart >= self.min_change * min(abs(self.mean(a)), abs(self.mean(b)))

    def change(self, before: str, release: str) -> Change:
        size = self.mean(release) - self.mean(before)
        spread = self._spread(before, release)
        base = self.mean(before)
        return {
            "before": before,
            "release": release,
            "size": round(size, 4),
            "interval": (round(size - spread, 4), round(size + spread, 4)),
            "relative": round(size / base, 4) if base else None,
            "stages": self._stage_moves(before, release),
            "fast_paths": self._fast_path_moves(before, release),
        }

    def _stage_means(self, version: str) -> dict[str, float]:
        samples = self.journal.samples[version]
        names = {name for s in samples for name in s["stages"]}
        return {name: statistics.fmean(s["stages"].get(name, 0.0) for s in samples) for name in names}

    def _stage_moves(self, before: str, release: str) -> list[tuple[str, float]]:
        a, b = self._stage_means(before), self._stage_means(release)
        moves = [(name, round(b.get(name, 0.0) - a.get(name, 0.0), 4)) for name in sorted(a.keys() | b.keys())]
        return sorted(moves, key=lambda move: -abs(move[1]))[:5]

    def _fast_path_moves(
        self, before: str, release: str
    ) -> dict[str, tuple[AttributeValue | None, AttributeValue | None]]:
        a = self.journal.samples[before][-1]["fast_paths"]
        b = self.journal.samples[release][-1]["fast_paths"]
        return {k: (a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k) and k != "version"}


def releases_between(available: Iterable[str], good: str, bad: str, pre: bool = False) -> list[str]:
    """The releases from ``good`` to ``bad`` (both included), in order; pre-releases only if asked."""
    from packaging.version import InvalidVersion, Version

    try:
        low, high = sorted((Version(good), Version(bad)))
    except InvalidVersion as exc:
        raise ValueError(f"{exc}: give versions like 1.83.14") from None
    chosen = []
    for text in set(available) | {good, bad}:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if low <= version <= high and (pre or not version.is_prerelease or version in (low, high)):
            chosen.append(version)
    ordered = [str(v) for v in sorted(chosen)]
    # Keep the spellings the user gave for the ends.
    return [good if Version(v) == Version(good) else bad if Version(v) == Version(bad) else v for v in ordered]


def bisect(
    versions: list[str],
    measure: Callable[[str], Sample],
    journal: Journal,
    *,
    budget_s: float | None = None,
    min_samples: int = MIN_SAMPLES,
    max_samples: int = MAX_SAMPLES,
    min_change: float = MIN_CHANGE,
    say: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
) -> BisectResult:
    """Find every release in ``versions`` (ordered, good end first) where the metric moved."""
    deadline = None if budget_s is None else _Deadline(budget_s, clock)
    stats = Bisection(journal, min_change)
    return _Search(versions, measure, journal, stats, min_samples, max_samples, say, deadline).run()


@dataclass
class _Deadline:
    """The search's budget, on its clock."""

    budget_s: float
    clock: Callable[[], float]
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def left_s(self) -> float:
        return self.budget_s - (self.clock() - self.started)


_OUT_OF_TIME = -1  # _Search.pick_middle: the budget ran out before a middle was measured


@dataclass
class _Search:
    """One run of ``bisect``: a stack of ranges (indexes into ``versions``),
    each searched by measuring its ends, and what the search found so far."""

    versions: list[str]
    measure: Callable[[str], Sample]
    journal: Journal
    stats: Bisection
    min_samples: int
    max_samples: int
    say: Callable[[str], None]
    deadline: _Deadline | None
    out_of_time: bool = False
    found: list[tuple[str, str]] = field(default_factory=list)  # (the release before, the one where it moved)
    unresolved: list[tuple[str, str, int]] = field(default_factory=list)  # as BisectResult's
    outcome: dict[tuple[int, int], bool | None] = field(default_factory=dict)  # a range's ends differ (None: unknown)
    split_at: dict[tuple[int, int], int] = field(default_factory=dict)  # a range searched in halves: its middle

    def run(self) -> BisectResult:
        work: list[tuple[int, int]] = [(0, len(self.versions) - 1)]
        while work:
            work += self.search(*work.pop())
        result = self.result()
        self.journal.result = result
        self.journal.save()
        return result

    def search(self, low: int, high: int) -> list[tuple[int, int]]:
        """Search one range: the halves still to search (none when its ends are alike, or it is settled)."""
        lower, upper = self.versions[low], self.versions[high]
        moved = None if self.out_of_time else self.differ(lower, upper)
        self.outcome[(low, high)] = moved
        if moved is None:
            self.unresolved.append((lower, upper, high - low - 1))
            return []
        if not moved:
            return []  # no change here beyond the noise
        middle = None if high == low + 1 else self.pick_middle(low, high)
        if middle == _OUT_OF_TIME:
            self.unresolved.append((lower, upper, high - low - 1))
        elif middle is None:  # next to each other, or only releases that do not install between them
            self.name_release(lower, upper, high - low - 1)
        else:
            # Both halves: each is searched only if its own ends differ, so a
            # regression in several steps is found step by step, and a half
            # whose ends are alike costs what it takes to show that.
            self.split_at[(low, high)] = middle
            return [(middle, high), (low, middle)]
        return []

    def name_release(self, lower: str, upper: str, between: int) -> None:
        """A release named is confirmed with one more sample of each side."""
        confirm = self.min_samples + 1
        if not (self.ensure(lower, confirm) and self.ensure(upper, confirm)):
            self.unresolved.append((lower, upper, between))
        elif self.stats.separated(lower, upper):
            self.found.append((lower, upper))

    def ensure(self, version: str, samples: int) -> bool:
        """At least ``samples`` samples of ``version``; False when the budget ran out first."""
        while len(self.stats.values(version)) < samples:
            left = None if self.deadline is None else self.deadline.left_s()
            if left is not None and left <= 0:
                self.out_of_time = True
                return False
            self.say(
                f"measuring {version} (sample {len(self.stats.values(version)) + 1})"
                + ("" if left is None else f", {left / 60:.1f} min of the budget left")
            )
            self.journal.add(version, self.measure(version))
        return True

    def differ(self, lower: str, upper: str) -> bool | None:
        """Whether the two ends of a range differ, measured again while unclear; None when out of time."""
        if not (self.ensure(lower, self.min_samples) and self.ensure(upper, self.min_samples)):
            return None
        values = self.stats.values
        while not self.stats.separated(lower, upper) and min(len(values(lower)), len(values(upper))) < self.max_samples:
            fewer = lower if len(values(lower)) <= len(values(upper)) else upper
            if not self.ensure(fewer, len(values(fewer)) + 1):
                return None
        return self.stats.separated(lower, upper)

    def pick_middle(self, low: int, high: int) -> int | None:
        """The release nearest the middle that can be measured (_OUT_OF_TIME; None: none can)."""
        versions = self.versions
        self.say(f"between {versions[low]} and {versions[high]}: {high - low - 1} release(s) left")
        for index in sorted(range(low + 1, high), key=lambda i: abs(2 * i - low - high)):
            version = versions[index]
            if version in self.journal.unavailable:
                continue
            try:
                return index if self.ensure(version, self.min_samples) else _OUT_OF_TIME
            except Unavailable as exc:
                self.say(f"{version} cannot be measured, going around it: {exc}")
                self.journal.unavailable[version] = str(exc)
                self.journal.save()
        return None

    def result(self) -> BisectResult:
        stats, versions = self.stats, self.versions
        # Sized with every sample taken, also those taken after the release was named.
        found = sorted(self.found, key=lambda pair: versions.index(pair[1]))
        return {
            "changes": [stats.change(lower, upper) for lower, upper in found],
            "drifts": self.drifts(),
            "unresolved": self.unresolved,
            "measured": {
                v: (round(stats.mean(v), 4), round(stats.half_width(v), 4), len(stats.values(v)))
                for v in versions
                if stats.values(v)
            },
            "complete": not self.unresolved,
            "unavailable": dict(self.journal.unavailable),
        }

    def drifts(self) -> list[Drift]:
        """Ranges whose ends differ though neither half's do."""
        drifts: list[Drift] = []
        for (low, high), middle in sorted(self.split_at.items()):
            if self.outcome.get((low, middle)) is False and self.outcome.get((middle, high)) is False:
                moved_by = self.stats.change(self.versions[low], self.versions[high])
                drifts.append(
                    {
                        "lower": self.versions[low],
                        "upper": self.versions[high],
                        "size": moved_by["size"],
                        "interval": moved_by["interval"],
                    }
                )
        return drifts
