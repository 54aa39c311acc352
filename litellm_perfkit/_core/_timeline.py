"""The per-request timeline: the only object touched on the hot path.

It stores integers from ``time.perf_counter_ns`` in plain tuples and lists and
does no formatting, id generation or object building: a finished stage is one
tuple appended at exit. Everything else (ids, sampling, spans, metrics)
happens off the request path, on ``StageEntry`` objects made from the tuples.
The fields live in the C accelerator's ``Timeline`` when it is built
(``_native``), so C code reads them without attribute lookups;
``_PyTimelineFields`` is their reference.
"""

from __future__ import annotations

import marshal
import operator
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Tuple

from ..types import AttributeValue, RequestRecord, StageKind, StageRecord
from ._context import DEFAULT_UPSTREAM, OPEN_STAGE, TIMELINE
from ._native import core

__all__ = ["StageEntry", "Timeline", "current_timeline", "OPEN_STAGE", "TIMELINE", "DEFAULT_UPSTREAM"]

# A finished block stage: (index, name, start_ns, end_ns, parent index).
Finished = Tuple[int, str, int, int, int]

# What ``encode`` writes and ``decode`` reads, in this order.
ENCODED_FIELDS = operator.attrgetter(
    "start_ns", "end_ns", "method", "path", "status", "streaming", "chunks", "body_bytes", "traceparent",
    "error", "marks", "finished", "generators", "attributes", "upstream", "gc_ns",
)  # fmt: skip


class StageEntry:
    """A stage as the export side sees it (built from the hot path's tuples)."""

    __slots__ = ("index", "name", "start_ns", "end_ns", "parent", "self_ns", "items", "kind")

    def __init__(
        self,
        index: int,
        name: str,
        start_ns: int,
        end_ns: int,
        parent: int,
        kind: StageKind = "block",
        self_ns: int = 0,
        items: int = 0,
    ) -> None:
        self.index = index
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.parent = parent
        self.kind: StageKind = kind
        self.self_ns = self_ns
        self.items = items

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns if self.kind == "block" else self.self_ns


class _PyTimelineFields:
    """The timeline's fields in Python: the reference for the C ``Timeline``."""

    __slots__ = (
        "start_ns",
        "finished",
        "generators",
        "next_index",
        "marks",
        "chunks",
        "body_bytes",
        "attributes",
        "method",
        "path",
        "status",
        "streaming",
        "traceparent",
        "error",
        "end_ns",
        "upstream",
        "gc_ns",
        "_entries",
    )

    def __init__(self, start_ns: int, method: str = "", path: str = "") -> None:
        self.start_ns = start_ns
        self.finished: list[Finished] = []
        # name -> [index, first_ns, last_ns, parent, self_ns, items, kind]
        self.generators: dict[str, list[Any]] = {}
        self.next_index = 0
        self.marks: dict[str, int] = {"received": start_ns}
        self.chunks = 0
        self.body_bytes = 0
        self.attributes: dict[str, AttributeValue] = {}
        self.method = method
        self.path = path
        self.status = 0
        self.streaming = False
        self.traceparent: str | None = None
        self.error: str | None = None
        self.end_ns = 0
        # Stages that wait on the upstream provider, not the gateway's own time.
        self.upstream: tuple[str, ...] = DEFAULT_UPSTREAM
        # Collector pause time inside the request (see _gcwatch). While the
        # request runs, the middleware keeps the watch's total at its start here.
        self.gc_ns = 0
        self._entries: list[StageEntry] | None = None


if TYPE_CHECKING:
    _TimelineFields = _PyTimelineFields
else:
    _TimelineFields = core(_PyTimelineFields, "Timeline")


class Timeline(_TimelineFields):
    """Timestamps of one request. Not thread-safe; one request, one event loop."""

    __slots__ = ()

    # -- hot path -----------------------------------------------------------
    def mark(self, name: str, at_ns: int | None = None) -> None:
        if name not in self.marks:
            self.marks[name] = perf_counter_ns() if at_ns is None else at_ns

    def add_generator_time(self, name: str, first_ns: int, self_ns: int, items: int, kind: StageKind = "generator") -> None:
        """Fold one run of an async generator's own time (or one call of a
        ``sum`` stage) into its stage."""
        now = perf_counter_ns()
        entry = self.generators.get(name)
        if entry is None:
            self.generators[name] = [self.next_index, first_ns, now, OPEN_STAGE.get(), self_ns, items, kind]
            self.next_index += 1
        else:
            entry[2] = now
            entry[4] += self_ns
            entry[5] += items

    # -- export side --------------------------------------------------------
    @property
    def stages(self) -> list[StageEntry]:
        """All recorded stages in the order they started (index order)."""
        if self._entries is None:
            entries = [StageEntry(i, n, s, e, p) for i, n, s, e, p in self.finished]
            entries += [
                StageEntry(i, name, first, last, parent, kind, own, items)
                for name, (i, first, last, parent, own, items, kind) in self.generators.items()
            ]
            entries.sort(key=lambda entry: entry.index)
            self._entries = entries
        return self._entries

    def encode(self) -> bytes:
        """The timeline as bytes for the export agent, built when the request ends.

        Bytes, not the timeline, wait in the export queue: a queue of live
        timelines (five containers each) made the garbage collector run and
        promote them, which cost the serving thread more than encoding does
        (docs/overhead.md). marshal keeps every value exactly (JSON would
        turn NaN and infinities into null, and refuses big ints); the agent
        runs this same interpreter. The C hand-off (_native) writes the same
        format without building the tuple."""
        return marshal.dumps(ENCODED_FIELDS(self), 2)  # version 2: no back-references, the same bytes for the same values

    @classmethod
    def decode(cls, data: bytes) -> Timeline:
        (start, end, method, path, status, streaming, chunks, body_bytes, traceparent, error,
         marks, finished, generators, attributes, upstream, gc_ns) = marshal.loads(data)  # fmt: skip
        timeline = cls(start, method, path)
        timeline.end_ns, timeline.status, timeline.streaming = end, status, streaming
        timeline.chunks, timeline.body_bytes = chunks, body_bytes
        timeline.traceparent, timeline.error = traceparent, error
        timeline.marks, timeline.generators, timeline.attributes = marks, generators, attributes
        timeline.finished, timeline.upstream = finished, upstream  # marshal keeps tuples as tuples
        timeline.gc_ns = gc_ns
        return timeline

    def freeze(self) -> RequestRecord:
        """An immutable public record (export side only). Parents refer to
        positions in ``stages``; a stage still open at the end is left out."""
        entries = self.stages
        position = {entry.index: n for n, entry in enumerate(entries)}
        stages = tuple(
            StageRecord(
                name=e.name,
                start_ns=e.start_ns,
                end_ns=e.end_ns,
                parent=position.get(e.parent, -1),
                kind=e.kind,
                self_ns=e.self_ns,
                items=e.items,
            )
            for e in entries
        )
        return RequestRecord(
            method=self.method,
            path=self.path,
            status=self.status,
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            stages=stages,
            marks=dict(self.marks),
            chunks=self.chunks,
            body_bytes=self.body_bytes,
            streaming=self.streaming,
            traceparent=self.traceparent,
            error=self.error,
            attributes=dict(self.attributes),
            upstream_stages=frozenset(self.upstream),
            gc_pause_ns=self.gc_ns,
        )


def current_timeline() -> Timeline | None:
    """The timeline of the request being served in this context, if any."""
    return TIMELINE.get()
