"""The per-request timeline: the only object touched on the hot path.

It stores integers from ``time.perf_counter_ns`` in plain lists and does no
formatting, no id generation and no allocation beyond one small list per stage.
Everything else (ids, sampling, spans, metrics) happens in the export thread.
"""

from __future__ import annotations

from contextvars import ContextVar
from time import perf_counter_ns

from ..types import AttributeValue, RequestRecord, StageKind, StageRecord

__all__ = ["StageEntry", "Timeline", "current_timeline", "TIMELINE"]


class StageEntry:
    """A stage while it is being recorded; ``end_ns`` is 0 until it exits."""

    __slots__ = ("name", "start_ns", "end_ns", "parent", "self_ns", "items", "kind")

    def __init__(self, name: str, start_ns: int, parent: int, kind: StageKind = "block") -> None:
        self.name = name
        self.start_ns = start_ns
        self.end_ns = 0
        self.parent = parent
        self.self_ns = 0
        self.items = 0
        self.kind: StageKind = kind

    @property
    def duration_ns(self) -> int:
        return self.self_ns if self.kind == "generator" else self.end_ns - self.start_ns


TIMELINE: ContextVar[Timeline | None] = ContextVar("perfkit_timeline", default=None)


class Timeline:
    """Timestamps of one request. Not thread-safe; one request, one event loop."""

    __slots__ = (
        "start_ns",
        "stages",
        "marks",
        "chunks",
        "body_bytes",
        "attributes",
        "open_stage",
        "method",
        "path",
        "status",
        "streaming",
        "traceparent",
        "error",
        "end_ns",
    )

    def __init__(self, start_ns: int, method: str = "", path: str = "") -> None:
        self.start_ns = start_ns
        self.stages: list[StageEntry] = []
        self.marks: dict[str, int] = {"received": start_ns}
        self.chunks = 0
        self.body_bytes = 0
        self.attributes: dict[str, AttributeValue] = {}
        # Nesting is tracked per timeline, not per task: cheap, and exact for the
        # sequential request handling of a gateway. Concurrent sub-tasks of one
        # request still get correct durations, only their parent may be coarse.
        self.open_stage = -1
        self.method = method
        self.path = path
        self.status = 0
        self.streaming = False
        self.traceparent: str | None = None
        self.error: str | None = None
        self.end_ns = 0

    def enter(self, name: str) -> int:
        index = len(self.stages)
        self.stages.append(StageEntry(name, perf_counter_ns(), self.open_stage))
        self.open_stage = index
        return index

    def exit(self, index: int) -> None:
        entry = self.stages[index]
        entry.end_ns = perf_counter_ns()
        self.open_stage = entry.parent

    def mark(self, name: str, at_ns: int | None = None) -> None:
        if name not in self.marks:
            self.marks[name] = perf_counter_ns() if at_ns is None else at_ns

    def add_generator_time(self, name: str, first_ns: int, self_ns: int, items: int) -> None:
        """Fold one run of an async generator's own time into its stage entry."""
        now = perf_counter_ns()
        for entry in reversed(self.stages):
            if entry.name == name and entry.kind == "generator":
                break
        else:
            entry = StageEntry(name, first_ns, self.open_stage, "generator")
            self.stages.append(entry)
        entry.end_ns = now
        entry.self_ns += self_ns
        entry.items += items

    def finished_stages_before(self, at_ns: int) -> list[tuple[str, int]]:
        """(name, duration_ns) of stages that ended by ``at_ns``, summed by name."""
        totals: dict[str, int] = {}
        for entry in self.stages:
            if entry.end_ns and entry.end_ns <= at_ns:
                totals[entry.name] = totals.get(entry.name, 0) + entry.duration_ns
        return list(totals.items())

    def freeze(self, upstream_stages: frozenset[str]) -> RequestRecord:
        """Turn the mutable timeline into an immutable record (export thread only)."""
        end_ns = self.end_ns
        stages = tuple(
            StageRecord(
                name=e.name,
                start_ns=e.start_ns,
                end_ns=e.end_ns or end_ns,
                parent=e.parent,
                kind=e.kind,
                self_ns=e.self_ns,
                items=e.items,
            )
            for e in self.stages
        )
        return RequestRecord(
            method=self.method,
            path=self.path,
            status=self.status,
            start_ns=self.start_ns,
            end_ns=end_ns,
            stages=stages,
            marks=dict(self.marks),
            chunks=self.chunks,
            body_bytes=self.body_bytes,
            streaming=self.streaming,
            traceparent=self.traceparent,
            error=self.error,
            attributes=dict(self.attributes),
            upstream_stages=upstream_stages,
        )


def current_timeline() -> Timeline | None:
    """The timeline of the request being served in this context, if any."""
    return TIMELINE.get()
