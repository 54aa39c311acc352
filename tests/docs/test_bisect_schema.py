"""docs/schemas/bisect.json describes the journal perfkit bisect writes.

The journal is written by ``_bisect.Journal.save`` from the search's own
records (``Sample``, ``Change``, ``Drift``, ``BisectResult``); the schema is
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

from litellm_perfkit._bench import _bisect
from litellm_perfkit._bench._bisect import BISECT_SCHEMA, Journal, Sample, Unavailable, bisect
from litellm_perfkit._bench._bisect_bench import METRICS
from tests.support.documents import DOCS, validate

SCHEMA = orjson.loads((DOCS / "bisect.json").read_bytes())
VERSIONS = [f"1.0.{n}" for n in range(12)]
SETTINGS = {"package": "fakegw", "metric": "cpu", "good": "1.0.0", "bad": "1.0.11", "min_change": 0.05}


def _measure(step_at: str | None, drift: float = 0.0, missing: tuple[str, ...] = ()) -> Any:
    rng = random.Random(1)

    def measure(version: str) -> Sample:
        if version in missing:
            raise Unavailable("needs a package the index lacks")
        index = VERSIONS.index(version)
        value = 10.0 + drift * index + (3.0 if step_at and index >= VERSIONS.index(step_at) else 0.0)
        layers = 2 if step_at and index >= VERSIONS.index(step_at) else 1
        return {
            "value": value + rng.gauss(0, 0.2),
            "stages": {"auth": value / 10, "route": 0.1},
            "fast_paths": {"stream_iterator": "wrapped", "stream_iterator_layers": layers, "per_chunk_hook": False},
        }

    return measure


def _journal(tmp_path: Path, **search: Any) -> dict[str, Any]:
    path = tmp_path / "bisect.json"
    measure = search.pop("measure")
    bisect(VERSIONS, measure, Journal.open(path, SETTINGS), **search)
    document: dict[str, Any] = orjson.loads(path.read_bytes())
    return document


def test_a_journal_with_a_change_and_a_release_that_does_not_install_is_valid(tmp_path: Path) -> None:
    document = _journal(tmp_path, measure=_measure("1.0.6", missing=("1.0.5",)))
    assert document["schema"] == BISECT_SCHEMA and document["result"]["complete"]
    assert document["result"]["changes"] and document["unavailable"]
    assert document["result"]["changes"][0]["fast_paths"]  # a fast path that moved, [before, after]
    validate(document, "bisect")


def test_a_journal_with_a_drift_is_valid(tmp_path: Path) -> None:
    document = _journal(tmp_path, measure=_measure(None, drift=0.3), max_samples=3)
    assert document["result"]["drifts"]
    validate(document, "bisect")


def test_a_journal_the_budget_stopped_is_valid(tmp_path: Path) -> None:
    now = [0.0]
    measure = _measure("1.0.6")

    def measured(version: str) -> Sample:
        now[0] += 60
        return typing.cast(Sample, measure(version))

    document = _journal(tmp_path, measure=measured, budget_s=200, clock=lambda: now[0])
    assert not document["result"]["complete"] and document["result"]["unresolved"]
    validate(document, "bisect")


def test_a_journal_before_its_answer_is_valid(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "bisect.json", SETTINGS)
    journal.add("1.0.0", _measure(None)("1.0.0"))
    document = orjson.loads((tmp_path / "bisect.json").read_bytes())
    assert document["result"] is None
    validate(document, "bisect")


def test_a_journal_of_another_shape_is_refused() -> None:
    import jsonschema

    document = {"schema": BISECT_SCHEMA, "settings": {}, "samples": {"1.0.0": [{"value": 1.0}]}, "unavailable": {}}
    with pytest.raises(jsonschema.ValidationError):
        validate(document, "bisect")


@pytest.mark.parametrize("record", ["Sample", "Change", "Drift", "BisectResult"])
def test_each_record_in_the_schema_has_the_fields_the_code_declares(record: str) -> None:
    declared = getattr(_bisect, record)
    described = SCHEMA["$defs"][record]
    assert set(described["properties"]) == set(typing.get_type_hints(declared)), (
        f"docs/schemas/bisect.json's {record} and _bench/_bisect.py's disagree"
    )
    assert set(described["required"]) == set(declared.__required_keys__)


def test_the_schema_names_the_metrics_bisect_takes() -> None:
    assert SCHEMA["properties"]["settings"]["properties"]["metric"]["enum"] == list(METRICS)
    assert SCHEMA["properties"]["schema"]["const"] == BISECT_SCHEMA
