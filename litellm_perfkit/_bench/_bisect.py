"""``perfkit bisect``: the releases where CPU per request moved, found by paired measurement.

The search is pure: it asks ``measure(lower, upper, first)`` for one pair
(both releases' proxies up together, sent bursts at once) and keeps every
pair in a journal, so it runs the same against the real proxies and a fake,
and a rerun resumes where the journal ends.

A range is compared end to end, in as many pairs as resolve ``resolution``
with the pair noise measured so far (pooled over every comparison of these
settings, ``_pair_stats``). A range whose ratio's interval excludes 1 is split
in two and both halves are compared, widest range first, so a regression in
several steps is found step by step and a run the budget stops still covers
the whole range. A release is named when it differs from the one before it,
in at least one pair more than ``min_pairs``. Ranges that do not differ (or cannot be
resolved within ``max_pairs``) end the search there: they and the named
releases tile the range, the per-release curve, each with its interval and
the smallest step it could have seen.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ._analysis import OUTSIDE_STAGES
from ._bisect_journal import BisectResult, Change, FunctionMove, Journal, Step, pair_key
from ._pair_stats import Noise, log_ratios, pairs_for, pooled_noise, ratio, resolution, stage_moves
from ._pairs import PairMetric, PairReading, Sides, Unavailable

__all__ = ["MAX_PAIRS", "MIN_CHANGE", "MIN_PAIRS", "RESOLUTION", "bisect", "releases_between"]

# The search's defaults, here once for bisect() and perfkit bisect's flags.
MIN_PAIRS = 2  # pairs of a comparison at least: one pair has no spread of its own
MAX_PAIRS = 8  # at most, while its interval holds 1 and is wider than the resolution asked
RESOLUTION = 0.03  # the relative step a comparison should resolve at 95%
MIN_CHANGE = 0.0  # the smallest change worth naming, relative, beyond its interval excluding zero


def _surely_moved(move: FunctionMove, direction: float) -> float:
    """How much a function's self CPU per request moved in ``direction`` at least, at 95%: the end
    of its interval nearest zero (its point move when it has none)."""
    interval = move["interval"]
    if interval is None:
        return direction * move["change_ms"]
    return min(direction * interval[0], direction * interval[1])


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


Measure = Callable[[str, str, Sides], PairReading]
Profile = Callable[[str, str, list[str]], list[FunctionMove]]


def bisect(
    versions: list[str],
    measure: Measure,
    journal: Journal,
    *,
    metric: PairMetric = "cpu",
    budget_s: float | None = None,
    target: float = RESOLUTION,
    min_pairs: int = MIN_PAIRS,
    max_pairs: int = MAX_PAIRS,
    min_change: float = MIN_CHANGE,
    known: dict[str, list[PairReading]] | None = None,
    prepare: Callable[[str], None] = lambda version: None,
    profile: Profile | None = None,
    say: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
) -> BisectResult:
    """Find every release in ``versions`` (ordered, good end first) where the metric moved.

    ``known``: pairs measured earlier with the same settings (pair_key -> pairs),
    reused for the same two releases and pooled into the noise. ``prepare``
    installs a release (raising Unavailable) before it is chosen as a middle.
    ``profile``: for each release named, the functions that moved in the stages that did (in every
    stage when none there did), the largest move in the change's direction first.
    A journal that holds a complete answer is that answer: nothing is measured."""
    stored = journal.load_result()
    if stored is not None and stored["complete"]:
        return stored
    deadline = None if budget_s is None else _Deadline(budget_s, clock)
    search = _Search(
        versions,
        measure,
        journal,
        metric,
        target,
        min_pairs,
        max_pairs,
        min_change,
        dict(known or {}),
        prepare,
        say,
        deadline,
    )
    return search.run(profile)


@dataclass
class _Deadline:
    budget_s: float
    clock: Callable[[], float]
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def left_s(self) -> float:
        return self.budget_s - (self.clock() - self.started)


Outcome = Literal["differs", "alike", "unsettled"]


@dataclass
class _Search:
    versions: list[str]
    measure: Measure
    journal: Journal
    metric: PairMetric
    target: float
    min_pairs: int
    max_pairs: int
    min_change: float
    known: dict[str, list[PairReading]]
    prepare: Callable[[str], None]
    say: Callable[[str], None]
    deadline: _Deadline | None
    out_of_time: bool = False
    leaves: list[tuple[int, int]] = field(default_factory=list)  # compared, not split: the curve
    found: list[tuple[int, int]] = field(default_factory=list)  # named releases: (the one before, it)
    unresolved: list[tuple[int, int]] = field(default_factory=list)

    def noise(self) -> Noise:
        comparisons = {**self.known, **self.journal.pairs}
        return pooled_noise(log_ratios(readings, self.metric) for readings in comparisons.values())

    def run(self, profile: Profile | None) -> BisectResult:
        before = self.noise()
        planned = pairs_for(self.target, before, self.min_pairs, self.max_pairs)
        self.say(
            f"resolution before the run: {resolution(before, planned):.1%} with {planned} pairs per comparison "
            + (
                f"(pair noise {before['sd']:.1%}, measured over {before['freedom']} degrees of freedom)"
                if before["freedom"]
                else f"(pair noise assumed {before['sd']:.1%}: no pair of these settings measured yet)"
            )
        )
        for end in (self.versions[0], self.versions[-1]):
            self.prepare(end)
        work: list[tuple[int, int, int]] = []
        heapq.heappush(work, (-(len(self.versions) - 1), 0, len(self.versions) - 1))
        while work:
            _, low, high = heapq.heappop(work)
            for half in self.search(low, high):
                heapq.heappush(work, (-(half[1] - half[0]), *half))
        after = self.noise()
        result = self.result(before, after)
        if profile is not None:
            self.profile_changes(result, profile)
        self.journal.result = result
        self.journal.save()
        return result

    def readings(self, low: int, high: int) -> list[PairReading]:
        return self.journal.pairs.get(pair_key(self.versions[low], self.versions[high]), [])

    def ensure(self, low: int, high: int, pairs: int) -> bool:
        """At least ``pairs`` pairs of the two releases; False when the budget ran out first."""
        lower, upper = self.versions[low], self.versions[high]
        key = pair_key(lower, upper)
        if key not in self.journal.pairs and self.known.get(key):
            self.say(f"reusing {len(self.known[key])} pair(s) of {lower} and {upper} measured earlier")
            for reading in self.known[key]:
                self.journal.add(key, reading)
        while len(self.readings(low, high)) < pairs:
            left = None if self.deadline is None else self.deadline.left_s()
            if left is not None and left <= 0:
                self.out_of_time = True
                return False
            done = len(self.readings(low, high))
            self.say(
                f"measuring {lower} against {upper} (pair {done + 1})"
                + ("" if left is None else f", {left / 60:.1f} min of the budget left")
            )
            self.journal.add(key, self.measure(lower, upper, "lower" if done % 2 == 0 else "upper"))
        return True

    def compare(self, low: int, high: int) -> Outcome | None:
        """One pair at a time, until the ratio's interval excludes 1, or resolves ``target``,
        or ``max_pairs``; None: out of time."""
        if not self.ensure(low, high, self.min_pairs):
            return None
        while True:
            readings = self.readings(low, high)
            if self.differs(low, high):
                return "differs"
            if ratio(readings, self.metric, self.noise())["resolution"] <= self.target:
                return "alike"
            if len(readings) >= self.max_pairs:
                return "unsettled"
            if not self.ensure(low, high, len(readings) + 1):
                return None

    def differs(self, low: int, high: int) -> bool:
        readings = self.readings(low, high)
        if len(readings) < self.min_pairs:
            return False
        measured = ratio(readings, self.metric, self.noise())
        low_r, high_r = measured["interval"]
        return (low_r > 1 or high_r < 1) and abs(measured["ratio"] - 1) >= self.min_change

    def search(self, low: int, high: int) -> list[tuple[int, int]]:
        """Compare one range: the halves still to search (none when it is settled)."""
        if self.out_of_time:
            self.unresolved.append((low, high))
            return []
        outcome = self.compare(low, high)
        if outcome is None:
            self.unresolved.append((low, high))
            return []
        if outcome != "differs":
            self.leaves.append((low, high))
            return []
        middle = None if high == low + 1 else self.pick_middle(low, high)
        if middle is None:  # next to each other, or only releases that do not install between them
            # Confirmed with a pair beyond the fewest a comparison takes: a release is not named on min_pairs alone.
            confirmed = self.ensure(low, high, self.min_pairs + 1)
            if not confirmed:
                self.unresolved.append((low, high))
                return []
            self.leaves.append((low, high))
            if self.differs(low, high):
                self.found.append((low, high))
            return []
        self.say(f"between {self.versions[low]} and {self.versions[high]}: {high - low - 1} release(s) left")
        return [(low, middle), (middle, high)]

    def pick_middle(self, low: int, high: int) -> int | None:
        """The release nearest the middle that can be installed (None: none can)."""
        for index in sorted(range(low + 1, high), key=lambda i: abs(2 * i - low - high)):
            version = self.versions[index]
            if version in self.journal.unavailable:
                continue
            try:
                self.prepare(version)
            except Unavailable as exc:
                self.say(f"{version} cannot be measured, going around it: {exc}")
                self.journal.unavailable[version] = str(exc)
                self.journal.save()
                continue
            return index
        return None

    def step(self, low: int, high: int, noise: Noise) -> Step:
        return {
            "lower": self.versions[low],
            "upper": self.versions[high],
            "between": high - low - 1,
            **ratio(self.readings(low, high), self.metric, noise),
        }

    def result(self, before: Noise, after: Noise) -> BisectResult:
        pairs = pairs_for(self.target, after, self.min_pairs, self.max_pairs)
        last = len(self.versions) - 1
        changes: list[Change] = []
        for low, high in sorted(self.found):
            readings = self.readings(low, high)
            lower, upper = readings[-1]["lower"]["fast_paths"], readings[-1]["upper"]["fast_paths"]
            changes.append(
                {
                    **self.step(low, high, after),
                    "stages": [move for move in stage_moves(readings, after) if move[2][0] > 0 or move[2][1] < 0][:5],
                    "fast_paths": {
                        k: (lower.get(k), upper.get(k))
                        for k in sorted(lower.keys() | upper.keys())
                        if lower.get(k) != upper.get(k) and k != "version"
                    },
                    "functions": self.journal.functions.get(pair_key(self.versions[low], self.versions[high]), []),
                }
            )
        return {
            "metric": self.metric,
            "changes": changes,
            "whole": self.step(0, last, after) if self.readings(0, last) else None,
            "curve": [self.step(low, high, after) for low, high in sorted(self.leaves)],
            "unresolved": [
                (self.versions[low], self.versions[high], high - low - 1) for low, high in sorted(self.unresolved)
            ],
            "resolution": {
                "before": round(resolution(before, pairs_for(self.target, before, self.min_pairs, self.max_pairs)), 4),
                "before_measured": before["freedom"] > 0,
                "after": round(resolution(after, pairs), 4),
                "pairs": pairs,
                "noise": round(after["sd"], 4),
                "freedom": after["freedom"],
            },
            "complete": not self.unresolved,
            "unavailable": dict(self.journal.unavailable),
        }

    def stages_seen(self, change: Change) -> list[str]:
        """Every stage of a change's pairs: a step below the spread of the spans' stage costs
        (the steps' wall time, which holds the partner's turns on the shared CPU) may move
        none beyond its interval, or only a stage of noise, and the profiles then look in all."""
        readings = self.journal.pairs.get(pair_key(change["lower"], change["upper"]), [])
        return sorted({name for r in readings for name in r["upper"]["stages"]} - {OUTSIDE_STAGES})

    def profile_changes(self, result: BisectResult, profile: Profile) -> None:
        """Each change's functions, profiled once (kept in the journal), while the budget lasts."""
        for change in result["changes"]:
            key = pair_key(change["lower"], change["upper"])
            if key not in self.journal.functions:
                if self.deadline is not None and self.deadline.left_s() <= 0:
                    self.say(f"not profiling {change['upper']}: the budget is spent; rerun to profile it")
                    continue
                moved = [name for name, _, _ in change["stages"]]
                stages = moved + [name for name in self.stages_seen(change) if name not in moved]
                self.say(f"profiling {change['lower']} against {change['upper']}, stages {', '.join(stages) or '-'}")
                try:
                    moves = profile(change["lower"], change["upper"], stages)
                except (RuntimeError, OSError) as exc:  # the release is named all the same; a rerun profiles it
                    self.say(f"could not profile {change['upper']}: {exc}")
                    continue
                # Those of the stages that moved that surely moved in the change's direction first,
                # then every other function that moved: a stage of noise can move beside the one
                # that grew, which then may not move beyond its interval. Within each, the largest
                # move certain at 95% in that direction first (its interval's end nearest zero): a
                # noisy function of a busy stage can move more, less surely.
                direction = 1.0 if change["ratio"] >= 1.0 else -1.0
                surest = sorted(moves, key=lambda move: -_surely_moved(move, direction))
                first = [m for m in surest if m["stage"] in moved and _surely_moved(m, direction) > 0]
                self.journal.functions[key] = first + [m for m in surest if m not in first]
                self.journal.save()
            change["functions"] = self.journal.functions.get(key, [])
