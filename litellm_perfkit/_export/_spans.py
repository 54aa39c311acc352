"""Request records to spans: one SERVER span per request, one child per stage.

Runs in the export thread only. Ids are drawn here, not on the hot path; an
incoming ``traceparent`` supplies the trace id and parent span id.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .._core._headers import parse_traceparent
from ..types import AttributeValue, RequestRecord, SamplerName

__all__ = ["SpanData", "Sampler", "record_to_spans", "reconcile", "SPAN_KIND_SERVER", "SPAN_KIND_INTERNAL"]

SPAN_KIND_INTERNAL = 1
SPAN_KIND_SERVER = 2
STATUS_UNSET = 0
STATUS_ERROR = 2

_rng = random.Random()


@dataclass(frozen=True)
class SpanData:
    """A span in neutral form; encoders turn it into OTLP JSON or protobuf."""

    trace_id: str  # 32 lowercase hex
    span_id: str  # 16 lowercase hex
    parent_span_id: str  # "" for a root span
    name: str
    kind: int
    start_unix_ns: int
    end_unix_ns: int
    attributes: dict[str, AttributeValue]
    status_code: int = STATUS_UNSET
    status_message: str = ""


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


def reconcile(record: RequestRecord) -> dict[str, float]:
    """Where the request's time went, in ms: total = upstream + attributed + unattributed.

    Attributed time is the sum of top-level stages other than upstream stages;
    nested stages are inside their parent and are not counted twice.
    """
    total = record.duration_ns
    upstream = record.upstream_ns
    attributed = sum(
        s.duration_ns for s in record.stages if s.parent == -1 and s.name not in record.upstream_stages
    )
    overhead = max(0, total - upstream)
    return {
        "perfkit.total_ms": total / 1e6,
        "perfkit.upstream_ms": upstream / 1e6,
        "perfkit.overhead_ms": overhead / 1e6,
        "perfkit.attributed_ms": attributed / 1e6,
        "perfkit.unattributed_ms": (overhead - attributed) / 1e6,
    }


def _server_attributes(record: RequestRecord) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "http.request.method": record.method,
        "url.path": record.path,
        "perfkit.streaming": record.streaming,
        "perfkit.chunks": record.chunks,
        "perfkit.body_bytes": record.body_bytes,
    }
    if record.status:
        attributes["http.response.status_code"] = record.status
    attributes.update(reconcile(record))
    for mark, at in record.marks.items():
        if mark != "received":
            attributes[f"perfkit.{mark}_ms"] = (at - record.start_ns) / 1e6
    if record.error:
        attributes["error.type"] = record.error
    attributes.update(record.attributes)
    return attributes


def record_to_spans(
    record: RequestRecord, sampler: Sampler, anchor_ns: int
) -> tuple[str, list[SpanData]]:
    """(trace_id, spans); spans is empty when the sampler drops the trace.

    ``anchor_ns`` turns perf_counter_ns into Unix ns (wall = perf + anchor).
    """
    parent = parse_traceparent(record.traceparent)
    if parent is None:
        trace_id = f"{_rng.getrandbits(128):032x}"
        parent_span_id, flags = "", None
    else:
        trace_id, parent_span_id, flags = parent
    if not sampler.should_sample(trace_id, flags):
        return trace_id, []
    server_id = f"{_rng.getrandbits(64):016x}"
    failed = record.error is not None or record.status >= 500
    spans = [
        SpanData(
            trace_id=trace_id,
            span_id=server_id,
            parent_span_id=parent_span_id,
            name=f"{record.method} {record.path}",
            kind=SPAN_KIND_SERVER,
            start_unix_ns=record.start_ns + anchor_ns,
            end_unix_ns=record.end_ns + anchor_ns,
            attributes=_server_attributes(record),
            status_code=STATUS_ERROR if failed else STATUS_UNSET,
            status_message=record.error or "",
        )
    ]
    stage_ids = [f"{_rng.getrandbits(64):016x}" for _ in record.stages]
    for index, stage in enumerate(record.stages):
        attributes: dict[str, AttributeValue] = {"perfkit.stage.duration_ms": stage.duration_ns / 1e6}
        if stage.kind == "generator":
            attributes["perfkit.stage.kind"] = "generator"
            attributes["perfkit.stage.items"] = stage.items
        spans.append(
            SpanData(
                trace_id=trace_id,
                span_id=stage_ids[index],
                parent_span_id=server_id if stage.parent < 0 else stage_ids[stage.parent],
                name=stage.name,
                kind=SPAN_KIND_INTERNAL,
                start_unix_ns=stage.start_ns + anchor_ns,
                end_unix_ns=stage.end_ns + anchor_ns,
                attributes=attributes,
            )
        )
    return trace_id, spans
