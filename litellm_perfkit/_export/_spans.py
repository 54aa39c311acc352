"""Request records to spans: one SERVER span per request, one child per stage.

Runs in the export thread only, and is written for speed on purpose: spans are
tuples (``Span``, a NamedTuple declared in ``_core/_layouts.py``, which C
builds too) built straight from the timeline, because on a 2-core machine
every microsecond here is taken from the requests (one GIL).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Literal, NamedTuple

from .._core._layouts import Span
from .._wire._headers import parse_traceparent, stage_span_id
from .._wire._names import OUTSIDE_WALL_STAGES, Attr, SemConv, gen_ai_operation
from ..types import AttributeValue, RequestRecord, SamplerName, StageRecord
from ._split import Split, time_split

__all__ = [
    "Attributes",
    "Span",
    "SpanForm",
    "Sampler",
    "reconcile",
    "record_to_spans",
    "request_spans",
    "stage_span_tuples",
    "StageSpans",
    "STAGE_KEYS",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_INTERNAL",
]

SPAN_KIND_INTERNAL = 1
SPAN_KIND_SERVER = 2
STATUS_UNSET = 0
STATUS_ERROR = 2

Attributes = list[tuple[str, AttributeValue]]

SpanForm = Literal["tuples", "protobuf"]
"""What an exporter's ``export_spans`` is handed: Span tuples, or ("protobuf")
also bytes, spans already encoded as OTLP protobuf (``_otlp.encode_stage_spans``):
the processor then builds no Python object per stage span."""

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


def exclusive_ns(record: RequestRecord, durations: list[int] | None = None) -> list[int]:
    """Each stage's own (exclusive) time, by position: its duration minus its child stages'."""
    if durations is None:
        durations = [stage.duration_ns for stage in record.stages]
    own = list(durations)
    for stage, duration in zip(record.stages, durations):
        parent = stage.parent
        if parent >= 0:
            own[parent] -= duration
    return [ns if ns > 0 else 0 for ns in own]


def wall_durations(record: RequestRecord, durations: list[int]) -> list[int]:
    """Each stage's duration inside the request's wall time, which ends at
    its last byte: a stage that ran on after it (one around the whole app)
    counts only its part before; the rest is the app's time after its last
    byte (``after_last_byte_ns``). ``durations`` itself when no stage did."""
    if not record.after_last_byte_ns:
        return durations
    end = record.end_ns
    inside: list[int] | None = None
    for n, stage in enumerate(record.stages):
        if stage.end_ns <= end:
            continue
        if inside is None:
            inside = list(durations)
        kind, start = stage.kind, stage.start_ns
        if kind == "block":
            part = end - start
        elif kind == "sum":
            calls = stage.intervals
            part = sum(min(b, end) - a for a, b in zip(calls[0::2], calls[1::2]) if a < end)
        elif kind == "thread":
            calls = stage.intervals
            part = sum(min(b, end) - a for a, b in zip(calls[0::3], calls[1::3]) if a < end)
        else:  # a generator's own time, spread evenly from its first resume to its last suspension
            part = durations[n] * (end - start) // (stage.end_ns - start)
        inside[n] = max(0, min(durations[n], part))
    return durations if inside is None else inside


def reconcile(
    record: RequestRecord, own: list[int] | None = None, durations: list[int] | None = None
) -> tuple[int, int, int, int]:
    """(total, upstream, attributed, unattributed) in ns.

    overhead = total - upstream = attributed + unattributed. Upstream is the
    sum of the upstream stages; attributed is the sum of every other stage's
    exclusive time, so a stage that contains the upstream call (LiteLLM's
    ``llm_call``) counts only its own part, and nothing is counted twice.
    Each stage counts only its part inside the request's wall time
    (``wall_durations``).
    """
    total = record.duration_ns
    upstream_names = record.upstream_stages
    if durations is None:
        durations = [stage.duration_ns for stage in record.stages]
    inside = wall_durations(record, durations)
    if inside is not durations:
        durations, own = inside, exclusive_ns(record, inside)
    elif own is None:
        own = exclusive_ns(record, durations)
    upstream = attributed = 0
    for n, stage in enumerate(record.stages):
        if stage.name in upstream_names:
            upstream += durations[n]
        elif stage.name not in OUTSIDE_WALL_STAGES:  # before the app or after the response: outside its wall time
            attributed += own[n]
    overhead = max(0, total - upstream)
    return total, upstream, attributed, overhead - attributed


# In Split's order: cpu, queue, io, uncertain.
_REQUEST_SPLIT = (Attr.CPU_MS, Attr.QUEUE_MS, Attr.IO_MS, Attr.UNCERTAIN_MS)
_REMAINDER_SPLIT = (Attr.REMAINDER_CPU_MS, Attr.REMAINDER_QUEUE_MS, Attr.REMAINDER_IO_MS, Attr.REMAINDER_UNCERTAIN_MS)


def _split_attributes(keys: tuple[str, ...], split: Split) -> Attributes:
    return [(key, ns / 1e6) for key, ns in zip(keys, split)]


def _server_attributes(record: RequestRecord, own: list[int], durations: list[int]) -> Attributes:
    total, upstream, attributed, unattributed = reconcile(record, own, durations)
    start = record.start_ns
    attributes: Attributes = [
        (SemConv.HTTP_REQUEST_METHOD, record.method),
        (SemConv.URL_PATH, record.path),
        (SemConv.HTTP_RESPONSE_STATUS_CODE, record.status),
        (Attr.STREAMING, record.streaming),
        (Attr.CHUNKS, record.chunks),
        (Attr.BODY_BYTES, record.body_bytes),
        (Attr.TOTAL_MS, total / 1e6),
        (Attr.UPSTREAM_MS, upstream / 1e6),
        (Attr.OVERHEAD_MS, (total - upstream) / 1e6 if total > upstream else 0.0),
        (Attr.ATTRIBUTED_MS, attributed / 1e6),
        (Attr.UNATTRIBUTED_MS, unattributed / 1e6),
        (Attr.ADJUSTED_COUNT, record.passed_by + 1),
    ]
    for mark, at in record.marks.items():
        attributes.append((f"perfkit.{mark}_ms", (at - start) / 1e6))
    if record.after_last_byte_ns > 0:
        attributes.append((Attr.AFTER_LAST_BYTE_MS, record.after_last_byte_ns / 1e6))
    if record.gc_pause_ns > 0:
        attributes.append((Attr.GC_PAUSE_MS, record.gc_pause_ns / 1e6))
    operation = gen_ai_operation(record.path)
    if operation is not None:
        attributes.append((SemConv.GEN_AI_OPERATION_NAME, operation))
    if record.error:
        attributes.append((SemConv.ERROR_TYPE, record.error))
    if record.attributes:
        attributes.extend(record.attributes.items())
    return attributes


def span_name(record: RequestRecord) -> str:
    """``{method} {http.route}`` as the conventions name a server span; the path when no route matched."""
    route = record.attributes.get(SemConv.HTTP_ROUTE)
    return f"{record.method} {route if isinstance(route, str) else record.path}"


def trace_context(record: RequestRecord) -> tuple[str, str, int | None]:
    """(trace_id, parent_span_id, parent flags) from the request's traceparent, or new
    (the trace the request chose while it ran, when the host traces)."""
    parent = parse_traceparent(record.traceparent)
    if parent is None:
        return (record.span_context[0] if record.span_context else f"{_bits(128):032x}"), "", None
    return parent


class StageSpans(NamedTuple):
    """What a request's stage spans are made of: the arguments of ``stage_spans``
    and ``stage_spans_protobuf`` (with ``STAGE_KEYS``), by position in the record's stages."""

    stages: tuple[StageRecord, ...]
    durations: list[int]
    own: list[int]
    splits: list[Split] | None
    ids: bytes | list[str]
    """8 random bytes a stage, or (ids chosen while the request ran) each stage's id as hex."""
    trace_id: str
    server_id: str
    anchor_ns: int
    end_ns: int


def request_spans(
    record: RequestRecord, trace_id: str, parent_span_id: str, anchor_ns: int, durations: list[int] | None = None
) -> tuple[Span, StageSpans]:
    """The request's server span, and what its stages' spans are made of; ``anchor_ns`` turns perf_counter_ns into
    Unix ns. ``durations``: each stage's ``duration_ns``, by position, when the caller has them already."""
    server_id = record.span_context[1] if record.span_context else f"{_bits(64):016x}"
    if durations is None:
        durations = [stage.duration_ns for stage in record.stages]
    own = exclusive_ns(record, durations)
    split = time_split(record)
    server_attributes = _server_attributes(record, own, durations)
    if split is not None:
        # The request's parts are all kept, zeros too: they say the split is there.
        server_attributes += _split_attributes(_REQUEST_SPLIT, split.request) + _split_attributes(
            _REMAINDER_SPLIT, split.remainder
        )
        if split.after_last_byte is not None:
            server_attributes.append((Attr.AFTER_LAST_BYTE_CPU_MS, split.after_last_byte.cpu_ns / 1e6))
        if record.steps_dropped:
            server_attributes.append((Attr.STEPS_DROPPED, record.steps_dropped))
    failed = record.error is not None or record.status >= 500
    server = Span(
        trace_id=trace_id,
        span_id=server_id,
        parent_span_id=parent_span_id,
        name=span_name(record),
        kind=SPAN_KIND_SERVER,
        start_unix_ns=record.start_ns + anchor_ns,
        end_unix_ns=record.end_ns + anchor_ns,
        attributes=server_attributes,
        status_code=STATUS_ERROR if failed else STATUS_UNSET,
        status_message=record.error or "",
    )
    # A stage was the current span under its id while it ran (a host that traces).
    chosen_while_running = record.span_context is not None
    ids: bytes | list[str] = _random_ids(len(record.stages))
    if chosen_while_running:
        drawn = hex_ids(ids)
        ids = [
            stage_span_id(server_id, stage.name, stage.start_ns) if stage.kind == "block" else drawn[n]
            for n, stage in enumerate(record.stages)
        ]
    splits = split.stages if split is not None else None
    stages = StageSpans(record.stages, durations, own, splits, ids, trace_id, server_id, anchor_ns, record.end_ns)
    return server, stages


def record_to_spans(
    record: RequestRecord, trace_id: str, parent_span_id: str, anchor_ns: int, durations: list[int] | None = None
) -> list[Span]:
    """The spans of one request: its server span, then one per stage."""
    server, stages = request_spans(record, trace_id, parent_span_id, anchor_ns, durations)
    return [server, *stage_span_tuples(stages)]


def stage_span_tuples(stages: StageSpans) -> list[Span]:
    """A span tuple per stage (the exporters that are handed tuples)."""
    s = stages
    ids = hex_ids(s.ids)
    return _stage_spans(
        s.stages, s.durations, s.own, s.splits, ids, s.trace_id, s.server_id, s.anchor_ns, s.end_ns, STAGE_KEYS
    )


def _random_ids(count: int) -> bytes:
    """``count`` random span ids, 8 bytes each, from one draw."""
    return _bits(64 * count).to_bytes(8 * count, "little") if count else b""


def hex_ids(ids: bytes | list[str]) -> list[str]:
    """Stage span ids as hex, one a stage (``StageSpans.ids``)."""
    if isinstance(ids, list):
        return ids
    return [ids[i : i + 8].hex() for i in range(0, len(ids), 8)]


# In the order _stage_spans reads them: duration, self, the four split parts, kind, items.
STAGE_KEYS = (
    Attr.STAGE_DURATION_MS,
    Attr.STAGE_SELF_MS,
    Attr.STAGE_CPU_MS,
    Attr.STAGE_QUEUE_MS,
    Attr.STAGE_IO_MS,
    Attr.STAGE_UNCERTAIN_MS,
    Attr.STAGE_KIND,
    Attr.STAGE_ITEMS,
)


def _stage_spans_python(
    stages: tuple[StageRecord, ...],
    durations: list[int],
    own: list[int],
    splits: list[Split] | None,
    ids: list[str],
    trace_id: str,
    server_id: str,
    anchor_ns: int,
    end_ns: int,
    keys: tuple[str, ...],
) -> list[Span]:
    """Each stage's span: the reference for the C accelerator's ``stage_spans``."""
    duration_key, self_key, cpu_key, queue_key, io_key, uncertain_key, kind_key, items_key = keys
    spans: list[Span] = []
    for n, stage in enumerate(stages):
        attributes: Attributes = [(duration_key, durations[n] / 1e6), (self_key, own[n] / 1e6)]
        if splits is not None:
            # A stage's zero parts are left out (a missing part is 0): most
            # stages never queue or wait, and every attribute costs the
            # export agent CPU on the proxy's core.
            cpu, queue, io, uncertain = splits[n]
            if cpu:
                attributes.append((cpu_key, cpu / 1e6))
            if queue:
                attributes.append((queue_key, queue / 1e6))
            if io:
                attributes.append((io_key, io / 1e6))
            if uncertain:
                attributes.append((uncertain_key, uncertain / 1e6))
        if stage.kind != "block":
            attributes.append((kind_key, stage.kind))
            attributes.append((items_key, stage.items))
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=ids[n],
                parent_span_id=ids[stage.parent] if stage.parent >= 0 else server_id,
                name=stage.name,
                kind=SPAN_KIND_INTERNAL,
                start_unix_ns=stage.start_ns + anchor_ns,
                end_unix_ns=(stage.end_ns or end_ns) + anchor_ns,
                attributes=attributes,
                status_code=STATUS_UNSET,
                status_message="",
            )
        )
    return spans


def _stage_spans_function() -> Callable[..., list[Span]]:
    """The C accelerator's ``stage_spans`` when it runs, else the Python reference."""
    from .._core._backend import ACTIVE

    speedups = ACTIVE.speedups
    return _stage_spans_python if speedups is None else speedups.stage_spans


_stage_spans = _stage_spans_function()
