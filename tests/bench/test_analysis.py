"""The bench's analysis of the spans it received (_bench/_analysis.py)."""

from __future__ import annotations

from typing import Any

from litellm_perfkit._bench._analysis import requests_cpu_per_request, sampled_warning
from litellm_perfkit._wire._names import EVENT_LOOP_STAGE, Attr


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


def _span(trace_id: str, name: str, kind: int, **attrs: float) -> dict[str, Any]:
    return {"trace_id": trace_id, "kind": kind, "name": name, "attrs": attrs}


def test_the_requests_cpu_is_each_requests_own_once_per_phase_and_the_named_part_less_the_outside() -> None:
    """Nested stages lie inside the request's CPU and are not added again; the
    server's parsing and the work after the response lie outside its window
    and are; a request the phase did not send (a warm-up, the other phase) and
    one without its server span count nowhere; each phase is a mean per request."""
    cpu, stage_cpu, remainder_cpu = Attr.CPU_MS, Attr.STAGE_CPU_MS, Attr.REMAINDER_CPU_MS
    spans = [
        _span("a", "POST /chat/completions", 2, **{cpu: 10.0, remainder_cpu: 1.0}),
        _span("a", "auth", 1, **{stage_cpu: 4.0}),
        _span("a", "auth.db", 1, **{stage_cpu: 3.0}),  # inside auth: part of its 4 ms
        _span("a", "protocol", 1, **{stage_cpu: 0.5}),
        _span("a", "after_response", 1, **{stage_cpu: 1.5}),
        _span("b", "POST /chat/completions", 2, **{cpu: 6.0}),
        _span("s", "POST /chat/completions", 2, **{cpu: 30.0, remainder_cpu: 2.0}),
        _span("warm", "POST /chat/completions", 2, **{cpu: 99.0}),
        _span("c", "auth", 1, **{stage_cpu: 50.0}),  # its server span never came
    ]
    own, named = requests_cpu_per_request(spans, {"nonstream": {"a", "b", "c"}, "stream": {"s"}})
    assert own == {"nonstream": (12.0 + 6.0) / 2, "stream": 30.0}
    assert named == {"nonstream": (11.0 + 6.0) / 2, "stream": 28.0}
    assert requests_cpu_per_request([_span("a", "auth", 1, **{stage_cpu: 4.0})], {"nonstream": {"a"}}) == (None, None)


def test_the_event_loops_cpu_charged_to_a_request_is_its_own_and_named() -> None:
    """With PERFKIT_STEPS=cpu the loop's CPU between steps (``event_loop``), outside the request's window, is
    counted with the request's own CPU and among the named stages."""
    cpu, stage_cpu, remainder_cpu = Attr.CPU_MS, Attr.STAGE_CPU_MS, Attr.REMAINDER_CPU_MS
    spans = [
        _span("a", "POST /chat/completions", 2, **{cpu: 10.0, remainder_cpu: 1.0}),
        _span("a", EVENT_LOOP_STAGE, 1, **{stage_cpu: 0.75}),
    ]
    assert requests_cpu_per_request(spans, {"nonstream": {"a"}}) == ({"nonstream": 10.75}, {"nonstream": 9.75})
