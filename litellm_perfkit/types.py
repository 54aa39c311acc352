"""Public types: the modes perfkit accepts and the records it produces.

Every timestamp is a ``time.perf_counter_ns()`` value (monotonic, per process).
Wall-clock time appears only when a record is exported, anchored once per batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

__all__ = [
    "AttributeValue",
    "ExportMode",
    "ExporterName",
    "HeaderMode",
    "Mark",
    "OtlpProtocol",
    "RequestRecord",
    "SamplerName",
    "SpeedupsMode",
    "StageKind",
    "StageRecord",
]

AttributeValue = Union[str, int, float, bool]

HeaderMode = Literal["on", "off"]
"""Whether the middleware adds a response header."""

ExporterName = Literal["otlp", "console", "jsonl", "none"]
"""Where finished requests go (``OTEL_TRACES_EXPORTER`` plus perfkit's ``jsonl``)."""

ExportMode = Literal["process", "thread"]
"""``process``: spans are built and exported by a child agent process, so the
host pays a few microseconds per request. ``thread``: all in a thread of the host."""

SpeedupsMode = Literal["on", "off"]
"""``PERFKIT_SPEEDUPS``: ``on`` runs the request path's C accelerator when it
is built; ``off`` runs the pure-Python path (the reference)."""

OtlpProtocol = Literal["http/protobuf", "http/json", "grpc"]
"""``OTEL_EXPORTER_OTLP_PROTOCOL`` values."""

SamplerName = Literal[
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
]
"""``OTEL_TRACES_SAMPLER`` values perfkit understands."""

Mark = Literal["headers_sent", "first_body_byte", "first_token", "last_byte"]
"""Point-in-time events of one request after it was received (``start_ns``)."""

StageKind = Literal["block", "generator", "sum"]
"""``block``: one contiguous interval. ``generator``: the time an async generator
spent running its own code (suspensions excluded), summed over the request.
``sum``: a function called many times per request (a per-chunk hook): its
calls' durations summed, ``items`` = calls."""


@dataclass(frozen=True)
class StageRecord:
    """One named stage of one request.

    ``start_ns``/``end_ns`` bound the stage in wall time. For ``generator`` stages
    they span first resume to last suspension, and ``self_ns`` is the time spent
    inside the generator's own code; ``duration_ns`` is what perfkit reports.
    """

    name: str
    start_ns: int
    end_ns: int
    parent: int  # index into RequestRecord.stages, -1 for a top-level stage
    kind: StageKind = "block"
    self_ns: int = 0
    items: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns if self.kind == "block" else self.self_ns


@dataclass
class RequestRecord:
    """A finished request, as exporters and listeners get it (never on the hot path).

    This declaration is also the request timeline's: every field but the
    derived ``stages`` is recorded on the hot path in this shape, and the
    timeline's slots, the C accelerator's struct, the hand-off to the export
    agent and the decoding back into this record all come from it
    (``_core/_fields.py``). A number or flag starts at 0.
    """

    start_ns: int
    method: str = ""
    path: str = ""
    status: int = 0
    end_ns: int = 0
    streaming: bool = False
    chunks: int = 0
    body_bytes: int = 0
    traceparent: str | None = None
    error: str | None = None
    marks: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    upstream_stages: tuple[str, ...] = ("upstream",)
    """Stages that wait on the upstream provider: not the gateway's own time."""
    gc_pause_ns: int = 0
    """Garbage-collector pause time inside the request's wall time (docs/telemetry.md).
    While the request runs, the timeline holds the collector's total at its start here."""
    stages: tuple[StageRecord, ...] = field(default=(), metadata={"derived": True})
    """In the order they started; a stage still open at the end is left out."""

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def upstream_ns(self) -> int:
        """Time in stages that wait on the upstream provider (not the gateway's own)."""
        return sum(s.duration_ns for s in self.stages if s.name in self.upstream_stages)

    @property
    def overhead_ns(self) -> int:
        """Gateway time over the whole request: total minus upstream waits."""
        return max(0, self.duration_ns - self.upstream_ns)

    @property
    def ttft_ns(self) -> int | None:
        first = self.marks.get("first_token")
        return None if first is None else first - self.start_ns
