"""The bench's analysis of the spans it received (_bench/_analysis.py)."""

from __future__ import annotations

from typing import Any

from litellm_perfkit._bench._analysis import sampled_warning


def _server(trace_id: str) -> dict[str, Any]:
    return {"trace_id": trace_id, "kind": 2, "name": "POST /chat/completions", "attrs": {}}


def test_no_warning_when_nearly_every_request_came_back_with_spans() -> None:
    sent = {f"t{i}" for i in range(100)}
    spans = [_server(f"t{i}") for i in range(95)] + [{"trace_id": "t1", "kind": 1, "name": "auth", "attrs": {}}]
    assert sampled_warning(spans, sent) is None
    assert sampled_warning([], set()) is None  # nothing sent: nothing to say


def test_a_sample_is_said_with_the_settings_that_fix_it() -> None:
    # A gateway recording 10 requests a second, or exporting every 5 s: most requests come back without spans.
    sent = {f"t{i}" for i in range(100)}
    spans = [_server(f"t{i}") for i in range(30)] + [_server("someone-else")]  # another client's request is not counted
    warning = sampled_warning(spans, sent)
    assert warning is not None and "only 30 of 100 requests" in warning
    assert "--record-rate all" in warning and "OTEL_BSP_SCHEDULE_DELAY=200" in warning
