"""docs/schemas/bisect.json describes the journal perfkit bisect writes.

The journal is written by ``_bisect_journal.Journal.save`` from the search's own
records (``SideReading``, ``PairReading``, ``Step``, ``FunctionMove``, ``Change``, ``Resolution``, ``BisectResult``); the schema is
written by hand, so this holds it to those declarations field by field, and
validates journals the search wrote. tests/bench/test_bisect.py validates the
journal of a real ``perfkit bisect`` over fake releases against it too.
"""

from __future__ import annotations

import random
import typing
from pathlib import Path
from typing import Any

import orjson
import pytest

from litellm_perfkit._bench import _bisect_journal, _pair_stats, _pairs
from litellm_perfkit._bench._bisect import bisect
from litellm_perfkit._bench._bisect_bench import METRICS
from litellm_perfkit._bench._bisect_journal import BISECT_SCHEMA, Journal
from litellm_perfkit._bench._pairs import PairReading, SideReading, Sides, Unavailable
from tests.support.bisect_pairs import side_reading
from tests.support.documents import DOCS, validate

SCHEMA = orjson.loads((DOCS / "bisect.json").read_bytes())
VERSIONS = [f"1.0.{n}" for n in range(12)]
SETTINGS = {"package": "fakegw", "metric": "cpu", "good": "1.0.0", "bad": "1.0.11", "min_change": 0.0}


def _side(cpu: float, layers: int) -> SideReading:
    fast_paths = {"stream_iterator": "wrapped", "stream_iterator_layers": layers, "per_chunk_hook": False}
    return side_reading(cpu, served=480, stages={"auth": cpu - 9.0, "route": 0.1}, fast_paths=fast_paths)


def _measure(step_at: str | None, drift: float = 0.0) -> Any:
    rng = random.Random(1)

    def level(version: str) -> float:
        index = VERSIONS.index(version)
        return 10.0 * (1 + drift) ** index * (1.05 if step_at and index >= VERSIONS.index(step_at) else 1.0)

    def layers(version: str) -> int:
        return 2 if step_at and VERSIONS.index(version) >= VERSIONS.index(step_at) else 1

    def measure(lower: str, upper: str, first: Sides) -> PairReading:
        return {
            "first": first,
            "cpu_log_ratio": None,
            "lower": _side(level(lower) * (1 + rng.gauss(0, 0.01)), layers(lower)),
            "upper": _side(level(upper) * (1 + rng.gauss(0, 0.01)), layers(upper)),
        }

    return measure


def _journal(tmp_path: Path, **search: Any) -> dict[str, Any]:
    path = tmp_path / "bisect.json"
    measure = search.pop("measure")
    bisect(VERSIONS, measure, Journal.open(path, SETTINGS), **search)
    document: dict[str, Any] = orjson.loads(path.read_bytes())
    return document


def _missing(*versions: str) -> Any:
    def prepare(version: str) -> None:
        if version in versions:
            raise Unavailable(version, "needs a package the index lacks")

    return prepare


def _profile(lower: str, upper: str, stages: list[str]) -> list[_bisect_journal.FunctionMove]:
    return [
        {
            "stage": "auth",
            "function": "check_quota (gw.py)",
            "before_ms": 0.0,
            "after_ms": 0.5,
            "change_ms": 0.5,
            "interval": (0.4, 0.6),
        }
    ]


def test_a_journal_with_a_change_and_a_release_that_does_not_install_is_valid(tmp_path: Path) -> None:
    document = _journal(tmp_path, measure=_measure("1.0.6"), prepare=_missing("1.0.5"), profile=_profile)
    assert document["schema"] == BISECT_SCHEMA and document["result"]["complete"]
    assert document["result"]["changes"] and document["unavailable"]
    assert document["result"]["changes"][0]["fast_paths"]  # a fast path that moved, [before, after]
    assert document["result"]["changes"][0]["functions"] and document["functions"]
    validate(document, "bisect")


def test_a_journal_with_a_drift_is_valid(tmp_path: Path) -> None:
    document = _journal(tmp_path, measure=_measure(None, drift=0.01), max_pairs=4)
    assert len(document["result"]["curve"]) > 1
    validate(document, "bisect")


def test_a_journal_the_budget_stopped_is_valid(tmp_path: Path) -> None:
    now = [0.0]
    measure = _measure("1.0.6")

    def measured(lower: str, upper: str, first: Sides) -> PairReading:
        now[0] += 60
        return typing.cast(PairReading, measure(lower, upper, first))

    document = _journal(tmp_path, measure=measured, budget_s=400, clock=lambda: now[0])
    assert not document["result"]["complete"] and document["result"]["unresolved"]
    validate(document, "bisect")


def test_a_journal_before_its_answer_is_valid(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "bisect.json", SETTINGS)
    journal.add("1.0.0..1.0.11", _measure(None)("1.0.0", "1.0.11", "lower"))
    document = orjson.loads((tmp_path / "bisect.json").read_bytes())
    assert document["result"] is None
    validate(document, "bisect")


def test_a_journal_of_another_shape_is_refused() -> None:
    import jsonschema

    document = {
        "schema": BISECT_SCHEMA,
        "settings": {},
        "pairs": {"1.0.0..1.0.1": [{"first": "lower", "cpu_log_ratio": 0.0, "lower": {"cpu_ms": 1.0}}]},
        "unavailable": {},
        "functions": {},
        "result": None,
    }
    with pytest.raises(jsonschema.ValidationError):
        validate(document, "bisect")


RECORDS = {
    "SideReading": _pairs,
    "PairReading": _pairs,
    "Step": _bisect_journal,
    "FunctionMove": _bisect_journal,
    "Change": _bisect_journal,
    "Resolution": _bisect_journal,
    "BisectResult": _bisect_journal,
}


@pytest.mark.parametrize("record", list(RECORDS))
def test_each_record_in_the_schema_has_the_fields_the_code_declares(record: str) -> None:
    assert _pair_stats.Ratio.__required_keys__ <= _bisect_journal.Step.__required_keys__
    declared = getattr(RECORDS[record], record)
    described = SCHEMA["$defs"][record]
    assert set(described["properties"]) == set(typing.get_type_hints(declared)), (
        f"docs/schemas/bisect.json's {record} and _bench/_bisect_journal.py's disagree"
    )
    assert set(described["required"]) == set(declared.__required_keys__)


def test_the_schema_names_the_metrics_bisect_takes() -> None:
    assert SCHEMA["properties"]["settings"]["properties"]["metric"]["enum"] == list(METRICS)
    assert SCHEMA["properties"]["schema"]["const"] == BISECT_SCHEMA
