"""docs/litellm.md's stage table lists exactly the stages the LiteLLM
instrumentation records (_litellm/_points.py's tables, per version range), each
with its kind, and the stage lists the docs quote elsewhere are the declared ones."""

from __future__ import annotations

import re
from typing import get_args

from litellm_perfkit._litellm._points import FRAMEWORK_STAGES, LLM_CALL, MIDDLEWARES, OUTBOUND, TABLES, Point, PointKind
from litellm_perfkit._wire._names import (
    AFTER_RESPONSE_THREAD_STAGE,
    EVENT_LOOP_STAGE,
    OUTSIDE_WALL_STAGES,
    UPSTREAM_STAGES,
)
from tests.docs.commands import ROOT
from tests.docs.markdown import prose, section, spans, table_rows

LITELLM = (ROOT / "docs" / "litellm.md").read_text()
TELEMETRY = (ROOT / "docs" / "telemetry.md").read_text()

# What a point of each kind records (_litellm/_wrap.py), as the table's kind column names it.
_RECORDS: dict[PointKind, tuple[str, ...]] = {
    "call": ("call",),
    "dependency": ("call",),
    "routes_added": ("call",),
    "route": ("call", LLM_CALL),  # the call, then awaiting what it returned
    "outbound": ("call", OUTBOUND),  # upstream inside the LLM call, outbound elsewhere
    "body_wait": ("sum",),
    "body_stream": ("sum",),
    "sum": ("sum",),
    "stream": ("generator",),
    "thread": ("thread", AFTER_RESPONSE_THREAD_STAGE),  # handed over after the response: its own stage
    "protocol": ("thread",),
    "deferred": ("block",),
    "metrics_app": (),  # LiteLLM's /metrics gets perfkit's families: no stage
    "detached": (),  # a long-lived task outside every request: no stage
}
_EXTRA_KINDS = {
    LLM_CALL: "call",
    OUTBOUND: "call",
    AFTER_RESPONSE_THREAD_STAGE: "thread",
}
# The version a row names when its stage is only in one range's table.
_RANGE_MARKS = {">=1.103": "1.103:", "<1.103": "before 1.103:"}


def recorded(points: tuple[Point, ...]) -> dict[str, str]:
    """Stage -> its kind, for every stage a table's points record (and the middleware stack's, and the event
    loop's between steps, which perfkit's step clock records with PERFKIT_STEPS=cpu)."""
    stages = {MIDDLEWARES: "call", EVENT_LOOP_STAGE: "generator"}
    for point in points:
        kind, *extra = _RECORDS[point.kind] or (None,)
        if kind is None:
            continue
        stages[point.stage] = kind
        stages.update((name, _EXTRA_KINDS[name]) for name in extra)
    return stages


def documented() -> dict[str, tuple[str, list[str]]]:
    """Stage -> (what it covers, its kinds), from the table under ## Stages."""
    rows = table_rows(section(LITELLM, "## Stages"))
    return {spans(name)[0]: (covers, [k.strip() for k in kinds.split(",")]) for name, covers, kinds in rows}


def test_every_point_kind_says_what_it_records() -> None:
    assert set(_RECORDS) == set(get_args(PointKind))


def test_the_stage_table_lists_exactly_the_recorded_stages() -> None:
    every = {stage for points in TABLES.values() for stage in recorded(points)}
    assert sorted(documented()) == sorted(every)


def test_each_stage_has_its_kind() -> None:
    rows = documented()
    for points in TABLES.values():
        for stage, kind in recorded(points).items():
            assert rows[stage][1][0] == kind, stage


def test_a_stage_of_one_version_range_says_which() -> None:
    rows = documented()
    for key, points in TABLES.items():
        others = {stage for other, table in TABLES.items() if other != key for stage in recorded(table)}
        for stage in recorded(points).keys() - others:
            assert rows[stage][0].startswith(_RANGE_MARKS[key]), f"{stage}: only in LiteLLM {key}"
    common = set.intersection(*(set(recorded(points)) for points in TABLES.values()))
    for stage in common:
        covers = rows[stage][0]
        assert not covers.startswith(tuple(_RANGE_MARKS.values())) or all(
            mark in covers for mark in ("1.103:", "1.83:")
        ), f"{stage} is in every range: its row names no single one"


def test_the_framework_upstream_and_outside_stages_are_marked_in_the_table() -> None:
    rows = documented()
    assert {stage for stage, (_, kinds) in rows.items() if "framework" in kinds} == FRAMEWORK_STAGES
    assert {stage for stage, (_, kinds) in rows.items() if "upstream" in kinds} == UPSTREAM_STAGES
    where = {"before the app", "after the response", "between steps"}
    outside = {stage for stage, (_, kinds) in rows.items() if where & set(kinds)}
    assert outside == OUTSIDE_WALL_STAGES


def _listed(page: str, pattern: str) -> set[str]:
    match = re.search(pattern, " ".join(prose(page).split()))
    assert match is not None, pattern
    return set(spans(match[1]))


def test_the_stage_lists_in_the_prose_are_the_declared_ones() -> None:
    assert _listed(LITELLM, r"An upstream wait inside a framework stage \(([^)]*)\)") == FRAMEWORK_STAGES
    assert _listed(LITELLM, r"Upstream is (.*?)\. Attributed") == UPSTREAM_STAGES
    assert _listed(TELEMETRY, r"sum of the upstream stages \((.*?)\) \|") == UPSTREAM_STAGES
