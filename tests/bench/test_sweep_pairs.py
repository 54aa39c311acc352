"""The version sweep's pairs: each version against the first until ±3% is resolved, pairs reused from the store."""

from __future__ import annotations

import random
from pathlib import Path

import jsonschema
import orjson
import pytest

from litellm_perfkit._bench import _sweep_pairs
from litellm_perfkit._bench._options import BenchOptions
from litellm_perfkit._bench._pairs import PairReading, SideReading
from tests.support.documents import DOCS


def _side(cpu: float) -> SideReading:
    return {"cpu_ms": cpu, "rps": 1000 / cpu, "requests": 400, "served": 480, "stages": {}, "fast_paths": {}}


def fake(levels: dict[str, float], noise: float, calls: list[tuple[str, str]]) -> _sweep_pairs.Measure:
    rng = random.Random(3)

    def measure(lower: str, upper: str, number: int) -> PairReading:
        calls.append((lower, upper))
        return {
            "first": "lower" if number % 2 == 0 else "upper",
            "lower": _side(levels[lower] * (1 + rng.gauss(0, noise))),
            "upper": _side(levels[upper] * (1 + rng.gauss(0, noise))),
            "cpu_log_ratio": None,
        }

    return measure


def test_each_version_gets_a_ratio_within_three_percent_and_pairs_are_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sweep_pairs, "CACHE", tmp_path)
    calls: list[tuple[str, str]] = []
    measure = fake({"1.83.14": 10.0, "1.103.0": 14.7}, 0.02, calls)
    options = BenchOptions(log=open("/dev/null", "w"))  # noqa: SIM115
    (measured,) = _sweep_pairs.sweep_pairs(options, ("1.83.14", "1.103.0"), measure=measure)
    assert (measured["baseline"], measured["version"]) == ("1.83.14", "1.103.0")
    assert measured["resolution"] <= 0.03 and measured["interval"][0] < 1.47 < measured["interval"][1]
    assert len(measured["cpu_ms"]) == len(calls) and all(b > a for a, b in measured["cpu_ms"])
    assert "1.103.0 / 1.83.14: 1.4" in _sweep_pairs.render_sweep_pairs([measured])
    schema = orjson.loads((DOCS / "bench.json").read_bytes())
    jsonschema.validate(
        [measured], {"type": "array", "items": schema["$defs"]["BenchSweepPairs"], "$defs": schema["$defs"]}
    )
    assert schema["$defs"]["BenchResult"]["properties"]["sweep_pairs"]["items"] == {"$ref": "#/$defs/BenchSweepPairs"}
    first = len(calls)
    again = _sweep_pairs.sweep_pairs(options, ("1.83.14", "1.103.0"), measure=measure)
    assert len(calls) == first and again == [measured]  # every pair reused from the store
