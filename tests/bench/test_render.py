"""The bench's text output (_bench/_render.py): what the stages' CPU is compared with."""

from __future__ import annotations

from typing import Any

from litellm_perfkit._bench._render import _recorded_cpu, _stage_table
from litellm_perfkit._wire._names import EVENT_LOOP_STAGE, PROTOCOL_STAGE


def _side(cpu_ms: float, agent_ms: float) -> dict[str, Any]:
    return {"rps": 10.0, "cpu_ms_per_request": cpu_ms, "agent_cpu_ms_per_request": agent_ms}


def test_with_the_plain_headline_the_stages_cpu_is_compared_with_the_recorded_proxys_less_its_agents() -> None:
    """The headline's CPU per request is the plain twin's; the spans, and so the
    stages' CPU, are the recorded proxy's: the process CPU they are a part of
    is the recorded proxy's, its export agents left out, phase by phase."""
    phase = {"plain": _side(10.0, 0.0), "recorded": _side(12.5, 0.5)}
    run: Any = {
        "proxy": {"cpu_ms_per_request": {"nonstream": 10.0, "stream": 30.0}},
        "perfkit_cost": {"record_rate": "all", "nonstream": phase, "stream": {**phase, "recorded": _side(36.0, 1.0)}},
    }
    assert _recorded_cpu(run) == {"nonstream": 12.0, "stream": 35.0}
    # The recorded headline: the proxy's own figure (its agents already apart).
    assert _recorded_cpu({"proxy": {"cpu_ms_per_request": {"nonstream": 10.0}}}) == {"nonstream": 10.0}  # type: ignore[typeddict-item]


def _stage(share: float | None, cpu_ms: float) -> dict[str, Any]:
    return {
        "p50_ms": 1.0,
        "p95_ms": 2.0,
        "mean_self_ms": 1.0,
        "share": share,
        "requests": 10,
        "upstream": False,
        "cpu_ms": cpu_ms,
        "queue_ms": 0.0,
        "io_ms": 0.0,
    }


def test_the_event_loops_cpu_between_steps_is_a_stage_outside_the_overhead_and_part_of_the_named_cpu() -> None:
    run: Any = {
        "joined_requests": 10,
        "stages": {"auth": _stage(0.5, 2.0), EVENT_LOOP_STAGE: _stage(None, 0.5), PROTOCOL_STAGE: _stage(None, 0.1)},
        "remainder": {"mean_ms": 1.0, "share": 0.5, "cpu_ms": 0.1, "queue_ms": 0.0, "io_ms": 0.0},
        "server_overhead_ms": {"mean": 2.0, "p50": 2.0, "p95": 2.0},
        "proxy": {
            "cpu_ms_per_request": {"nonstream": 2.8},
            "steps_cpu_ms_per_request": {"nonstream": 2.7},
            "named_cpu_ms_per_request": {"nonstream": 2.6},
        },
    }
    lines = _stage_table(run)
    assert f"| {EVENT_LOOP_STAGE} | 1.000 | 2.000 | 1.000 | between steps |" in lines
    assert f"| {PROTOCOL_STAGE} | 1.000 | 2.000 | 1.000 | before the app |" in lines
    assert "| total | | | 2.000 | 100.0% |" in lines  # the shares of the stages within the wall time, and the rest
    text = "\n".join(lines)
    assert "nonstream 2.70 of 2.80 ms (96%)" in text and "the event loop's work between them" in text
    assert "named stages' CPU against the proxy's process CPU, per request: nonstream 2.60 of 2.80 ms (93%)" in text
