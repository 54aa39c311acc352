"""Timelines to spans: one SERVER span per request, one child per stage.

Runs in the export thread only, and is written for speed on purpose: spans are
plain tuples (see ``Span``) built straight from the timeline, because on a
2-core machine every microsecond here is taken from the requests (one GIL).
"""

from __future__ import annotations

import random
from typing import Tuple

from .._wire._headers import parse_traceparent
from .._core._timeline import Timeline
from ..types import AttributeValue, SamplerName

__all__ = [
    "Attributes",
    "Span",
    "Sampler",
    "reconcile",
    "timeline_to_spans",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_INTERNAL",
]

SPAN_KIND_INTERNAL = 1
SPAN_KIND_SERVER = 2
STATUS_UNSET = 0
STATUS_ERROR = 2

Attributes = list[Tuple[str, AttributeValue]]
# (trace_id hex, span_id hex, parent_span_id hex or "", name, kind,
#  start unix ns, end unix ns, attributes, status code, status message)
Span = Tuple[str, str, str, str, int, int, int, Attributes, int, str]

_bits = random.Random().getrandbits


class Sampler:
    """The OTel samplers by name; decisions use the trace id like the SDK does."""

    def __init__(self, name: SamplerName, ratio: float = 1.0) -> None:
        self.name = name
        self._bound = round(ratio * (1 << 64))

    def _root(self, trace_id: str) -> bool:
        if self.name.endswith("always_on"):
            return True
        if self.name.endswith("always_off"):
            return False
        return int(trace_id[16:], 16) < self._bound

    def should_sample(self, trace_id: str, parent_flags: int | None) -> bool:
        if self.name.startswith("parentbased_") and parent_flags is not None:
            return bool(parent_flags & 1)
        return self._root(trace_id)


def exclusive_ns(timeline: Timeline) -> dict[int, int]:
    """Each stage's own (exclusive) time: its duration minus its child stages'."""
    stages = timeline.stages
    children: dict[int, int] = {}
    for entry in stages:
        if entry.parent >= 0:
            children[entry.parent] = children.get(entry.parent, 0) + entry.duration_ns
    return {entry.index: max(0, entry.duration_ns - children.get(entry.index, 0)) for entry in stages}


def reconcile(timeline: Timeline, own: dict[int, int] | None = None) -> tuple[int, int, int, int]:
    """(total, upstream, attributed, unattributed) in ns.

    overhead = total - upstream = attributed + unattributed. Upstream is the
    sum of the upstream stages; attributed is the sum of every other stage's
    exclusive time, so a stage that contains the upstream call (LiteLLM's
    ``llm_call``) counts only its own part, and nothing is counted twice.
    """
    total = timeline.end_ns - timeline.start_ns
    upstream_names = timeline.upstream
    if own is None:
        own = exclusive_ns(timeline)
    upstream = attributed = 0
    for entry in timeline.stages:
        if entry.name in upstream_names:
            upstream += entry.duration_ns
        else:
            attributed += own[entry.index]
    overhead = max(0, total - upstream)
    return total, upstream, attributed, overhead - attributed


def _server_attributes(timeline: Timeline, own: dict[int, int]) -> Attributes:
    total, upstream, attributed, unattributed = reconcile(timeline, own)
    start = timeline.start_ns
    attributes: Attributes = [
        ("http.request.method", timeline.method),
        ("url.path", timeline.path),
        ("http.response.status_code", timeline.status),
        ("perfkit.streaming", timeline.streaming),
        ("perfkit.chunks", timeline.chunks),
        ("perfkit.body_bytes", timeline.body_bytes),
        ("perfkit.total_ms", total / 1e6),
        ("perfkit.upstream_ms", upstream / 1e6),
        ("perfkit.overhead_ms", (total - upstream) / 1e6 if total > upstream else 0.0),
        ("perfkit.attributed_ms", attributed / 1e6),
        ("perfkit.unattributed_ms", unattributed / 1e6),
    ]
    for mark, at in timeline.marks.items():
        if mark != "received":
            attributes.append((f"perfkit.{mark}_ms", (at - start) / 1e6))
    if timeline.gc_ns > 0:
        attributes.append(("perfkit.gc_pause_ms", timeline.gc_ns / 1e6))
    if timeline.error:
        attributes.append(("error.type", timeline.error))
    if timeline.attributes:
        attributes.extend(timeline.attributes.items())
    return attributes


def trace_context(timeline: Timeline) -> tuple[str, str, int | None]:
    """(trace_id, parent_span_id, parent flags) from the request's traceparent, or new."""
    parent = parse_traceparent(timeline.traceparent)
    if parent is None:
        return f"{_bits(128):032x}", "", None
    return parent


def timeline_to_spans(timeline: Timeline, trace_id: str, parent_span_id: str, anchor_ns: int) -> list[Span]:
    """The spans of one request; ``anchor_ns`` turns perf_counter_ns into Unix ns."""
    server_id = f"{_bits(64):016x}"
    own = exclusive_ns(timeline)
    failed = timeline.error is not None or timeline.status >= 500
    spans: list[Span] = [
        (
            trace_id,
            server_id,
            parent_span_id,
            f"{timeline.method} {timeline.path}",
            SPAN_KIND_SERVER,
            timeline.start_ns + anchor_ns,
            timeline.end_ns + anchor_ns,
            _server_attributes(timeline, own),
            STATUS_ERROR if failed else STATUS_UNSET,
            timeline.error or "",
        )
    ]
    stage_ids: dict[int, str] = {}
    end_default = timeline.end_ns
    for entry in timeline.stages:
        span_id = stage_ids[entry.index] = f"{_bits(64):016x}"
        attributes: Attributes = [
            ("perfkit.stage.duration_ms", entry.duration_ns / 1e6),
            ("perfkit.stage.self_ms", own[entry.index] / 1e6),
        ]
        if entry.kind != "block":
            attributes.append(("perfkit.stage.kind", entry.kind))
            attributes.append(("perfkit.stage.items", entry.items))
        spans.append(
            (
                trace_id,
                span_id,
                stage_ids.get(entry.parent, server_id),
                entry.name,
                SPAN_KIND_INTERNAL,
                entry.start_ns + anchor_ns,
                (entry.end_ns or end_default) + anchor_ns,
                attributes,
                STATUS_UNSET,
                "",
            )
        )
    return spans
