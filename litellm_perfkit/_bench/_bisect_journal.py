"""What ``perfkit bisect`` writes: its journal (every pair, kept on disk after each, so a
rerun resumes) and its records, the answer's steps, changes and resolution
(``docs/schemas/bisect.json`` describes them from here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import orjson

from ..types import AttributeValue
from ._pair_stats import Ratio
from ._pairs import PairMetric, PairReading

__all__ = [
    "BISECT_SCHEMA",
    "BisectResult",
    "Change",
    "FunctionMove",
    "Journal",
    "Resolution",
    "Step",
    "pair_key",
]

BISECT_SCHEMA = "perfkit.bisect/2"


class Step(Ratio):
    """One comparison: ``upper`` against ``lower`` (``between`` releases between them)."""

    lower: str
    upper: str
    between: int


class FunctionMove(TypedDict):
    """A function whose CPU per request grew (or shrank) inside a stage, from per-stage profiles."""

    stage: str
    function: str
    before_ms: float  # its self CPU per request in the stage, the release before
    after_ms: float
    change_ms: float
    interval: tuple[float, float] | None  # 95%, from the profiled pairs' spread


class Change(Step):
    """A release where the metric moved: from the release before it (``lower``) to it (``upper``)."""

    stages: list[tuple[str, float, tuple[float, float]]]  # own CPU per request, upper - lower, 95% interval
    fast_paths: dict[str, tuple[AttributeValue | None, AttributeValue | None]]
    functions: list[FunctionMove]  # empty: not profiled (no profiler, or the budget ran out)


class Resolution(TypedDict):
    """The smallest relative step a comparison resolves at 95%, from the pair noise."""

    before: float  # with the noise known when the run began (PRIOR_NOISE when none was measured)
    before_measured: bool
    after: float  # with the noise pooled over every pair of these settings at the end
    pairs: int  # per comparison, for ``--resolution``, with the noise at the end
    noise: float  # one pair's log-ratio standard deviation, at the end
    freedom: int


class BisectResult(TypedDict):
    metric: PairMetric
    changes: list[Change]
    whole: Step | None  # the two ends compared (None: the budget ran out first)
    curve: list[Step]  # the finest comparisons measured, in release order: they tile the range
    unresolved: list[tuple[str, str, int]]  # (lower, upper, releases between): not compared when the budget ran out
    resolution: Resolution
    complete: bool
    unavailable: dict[str, str]  # releases that could not be measured, and why


def pair_key(lower: str, upper: str) -> str:
    return f"{lower}..{upper}"


@dataclass
class Journal:
    """Every pair measured, kept on disk after each: a rerun resumes from it."""

    path: Path | None
    settings: dict[str, Any]
    pairs: dict[str, list[PairReading]] = field(default_factory=dict)  # pair_key -> its pairs
    unavailable: dict[str, str] = field(default_factory=dict)  # version -> why it cannot be measured
    functions: dict[str, list[FunctionMove]] = field(default_factory=dict)  # pair_key of a change -> profiled moves
    result: BisectResult | None = None
    _stored_result: BisectResult | None = field(default=None, repr=False)

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
            journal = cls(path, settings, data.get("pairs", {}), data.get("unavailable", {}), data.get("functions", {}))
            journal._stored_result = data.get("result")
            return journal
        return cls(path, settings)

    def load_result(self) -> BisectResult | None:
        """The answer an earlier run wrote, if it got that far."""
        return self._stored_result

    def add(self, key: str, reading: PairReading) -> None:
        self.pairs.setdefault(key, []).append(reading)
        self.save()

    def save(self) -> None:
        if self.path is not None:
            document = {
                "schema": BISECT_SCHEMA,
                "settings": self.settings,
                "pairs": self.pairs,
                "unavailable": self.unavailable,
                "functions": self.functions,
                "result": self.result,
            }
            self.path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
