"""The bench's text output (_bench/_render.py): what the stages' CPU is compared with."""

from __future__ import annotations

from typing import Any

from litellm_perfkit._bench._render import _recorded_cpu


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
