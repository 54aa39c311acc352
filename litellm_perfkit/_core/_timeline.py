"""The per-request timeline: the only object touched on the hot path.

It stores integers from ``time.perf_counter_ns`` in plain tuples and lists and
does no formatting, id generation or object building: a finished stage is one
tuple appended at exit. Everything else (ids, sampling, spans, metrics)
happens off the request path, on the ``RequestRecord`` decoded from it.

Its fields are ``types.RequestRecord``'s (``_fields.py``). They live in the
C accelerator's ``Timeline`` when it runs, so C code reads them without
attribute lookups, or in ``_PyTimelineFields``; ``_backend`` puts the
methods here on top of either.
"""

from __future__ import annotations

import dataclasses
import marshal
import operator
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from ..types import RequestRecord, StageKind, StageRecord
from ._context import OPEN_STAGE, TIMELINE, open_stage, read_timeline
from ._fields import CONSTRUCTOR, SUM_CALL, THREAD_CALL, GeneratorEntry, layout

__all__ = ["LAYOUT", "Timeline", "current_timeline", "decode", "stage_records", "OPEN_STAGE", "TIMELINE"]

LAYOUT = layout(RequestRecord)
# A finished block stage (_fields.FINISHED): (index, name, start_ns, end_ns, parent index).
Finished = tuple[int, str, int, int, int]
# What ``encode`` writes and ``decode`` reads, in this order.
_ENCODED = operator.attrgetter(*LAYOUT.encoded)
# The lists the C timeline keeps raw (an Int64List, a StageList): their positions in the encoding.
_RAW_LISTS = tuple(i for i, f in enumerate(f for f in LAYOUT.fields if f.encoded) if f.c_list != "list")
_GENERATORS = LAYOUT.encoded.index("generators")
_INTERVALS = GeneratorEntry.INTERVALS


def _plain(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The encoded fields' values with each raw list as the list it stands for, the calls of the
    C timeline's sum stages (an Int64List in their entries) too."""
    plain = [list(value) if i in _RAW_LISTS else value for i, value in enumerate(values)]
    generators: dict[str, list[Any]] = values[_GENERATORS]
    plain[_GENERATORS] = {
        name: entry if type(entry[_INTERVALS]) is list else [*entry[:_INTERVALS], list(entry[_INTERVALS])]
        for name, entry in generators.items()
    }
    return tuple(plain)


def _python_fields() -> type:
    """The fields in Python: slots, and a constructor written out from the layout
    (assignments with literal defaults, as fast as a hand-written one)."""
    namespace: dict[str, Any] = {}
    defaults = {f.name: f.default for f in LAYOUT.fields}
    parameters = [CONSTRUCTOR[0], *(f"{name}=_default_{name}" for name in CONSTRUCTOR[1:])]
    body = []
    for f in LAYOUT.fields:
        if f.name in CONSTRUCTOR:
            value = f.name
        elif f.factory:
            value = {dict: "{}", list: "[]"}.get(f.default, f"_new_{f.name}()")
        else:
            value = f"_default_{f.name}"
        body.append(f"    self.{f.name} = {value}")
        namespace[f"_default_{f.name}"] = defaults[f.name]
        namespace[f"_new_{f.name}"] = f.default
    exec(f"def __init__(self, {', '.join(parameters)}):\n" + "\n".join(body), namespace)  # noqa: S102
    doc = "The timeline's fields in Python: the reference for the C ``Timeline``."
    return type("_PyTimelineFields", (), {"__slots__": LAYOUT.names, "__init__": namespace["__init__"], "__doc__": doc})


_PyTimelineFields = _python_fields()

if TYPE_CHECKING:

    class _TimelineFields(RequestRecord):  # what the type checker sees: the record's fields, mutable
        finished: list[Finished]
        generators: dict[str, list[Any]]
        next_index: int
        held_tasks: int
        waiting: bool

else:
    _TimelineFields = object


class Timeline(_TimelineFields):
    """Timestamps of one request. Not thread-safe; one request, one event loop.

    The methods; each backend's class (``_backend``) adds the fields. An
    instance of either is an instance of this class."""

    __slots__ = ()

    # -- hot path -----------------------------------------------------------
    def mark(self, name: str, at_ns: int | None = None) -> None:
        if name not in self.marks:
            self.marks[name] = perf_counter_ns() if at_ns is None else at_ns

    def has_stage(self, name: str, since_index: int = 0) -> bool:
        """Whether a finished block stage ``name`` has an index of at least ``since_index``. The C
        timeline's StageList answers in place: iterating it would build each stage's tuple and times."""
        finished: Any = self.finished  # a list (the reference timeline's), or the C timeline's StageList
        if type(finished) is list:
            return any(index >= since_index and stage == name for index, stage, _, _, _ in finished)
        return bool(finished.has(name, since_index))

    def add_generator_time(
        self, name: str, first_ns: int, self_ns: int, items: int, kind: StageKind = "generator"
    ) -> None:
        """Fold one run of an async generator's own time (or one call of a
        ``sum`` stage) into its stage (a list, by GeneratorEntry's positions)."""
        now = perf_counter_ns()
        enclosing = open_stage()
        parent = -1 if enclosing is None else enclosing.index
        entry = self.generators.get(name)
        if entry is None:
            # A sum stage's calls each keep their parent (SUM_CALL): calls under
            # different stages become one stage each when the record is decoded.
            # A call's end is its start and duration as the caller measured them, so its intervals add up to self_ns.
            calls = [first_ns, first_ns + self_ns, parent] if kind == "sum" else []
            GeneratorEntry.new(
                self,
                name,
                kind,
                first_ns=first_ns,
                last_ns=now,
                intervals=calls,
                parent=parent,
                self_ns=self_ns,
                items=items,
            )
        else:
            entry[GeneratorEntry.LAST_NS] = now
            entry[GeneratorEntry.SELF_NS] += self_ns
            entry[GeneratorEntry.ITEMS] += items
            if kind == "sum":  # a list, or the C timeline's Int64List (csrc/staged.c makes its entries)
                entry[GeneratorEntry.INTERVALS] += (first_ns, first_ns + self_ns, parent)

    # -- export side --------------------------------------------------------
    def encode(self) -> bytes:
        """The timeline as bytes for the export agent, built when the request ends.

        Bytes, not the timeline, wait in the export queue: a queue of live
        timelines (five containers each) made the garbage collector run and
        promote them, which cost the serving thread more than encoding does
        (docs/overhead.md). marshal keeps every value exactly (JSON would
        turn NaN and infinities into null, and refuses big ints); the agent
        runs this same interpreter. The C encoder (csrc/encode.c) writes the same
        format without building the tuple."""
        values = _ENCODED(self)
        try:  # version 2: no back-references, the same bytes for the same values
            return marshal.dumps(values, 2)
        except ValueError:  # a raw list (Int64List, StageList), which marshal does not know: the C timeline's
            return marshal.dumps(_plain(values), 2)

    def freeze(self) -> RequestRecord:
        """The public record of this timeline (export side only)."""
        values = dict(zip(LAYOUT.encoded, _plain(_ENCODED(self))))
        values["marks"], values["attributes"] = dict(self.marks), dict(self.attributes)
        return _record(values)


def decode(data: bytes) -> RequestRecord:
    """``Timeline.encode``'s bytes (or the C hand-off's) as the public record."""
    return _record(dict(zip(LAYOUT.encoded, marshal.loads(data))))


def _record(values: dict[str, Any]) -> RequestRecord:
    stages = stage_records(values.pop("finished"), values.pop("generators"))
    return RequestRecord(**values, stages=stages)


# A stage before its parent's position is known: StageRecord's fields, in order.
_Row = tuple[str, int, int, int, StageKind, int, int, tuple[int, ...]]


def stage_records(finished: list[Finished], generators: dict[str, list[Any]]) -> tuple[StageRecord, ...]:
    """The recorded stages in the order they started; parents become
    positions in the result, and a stage still open at the end is left out.
    The C accelerator's when it runs (the export agent decodes every
    request), else ``_stage_records_python``."""
    global _stage_records
    if _stage_records is None:
        _stage_records = _stage_records_function()
    return _stage_records(finished, generators)


def _stage_records_python(finished: list[Finished], generators: dict[str, list[Any]]) -> tuple[StageRecord, ...]:
    """``stage_records``' reference: each record is built once, its parent already a position."""
    entries: list[tuple[float, _Row]] = [
        (index, (name, start, end, parent, "block", 0, 0, ())) for index, name, start, end, parent in finished
    ]
    for name, (index, first, last, parent, own, items, kind, intervals) in generators.items():
        if kind in _CALLS:
            # After its parent, which may have started after the first call (ties keep this order).
            entries += ((max(index, row[3] + 0.5), row) for row in _per_parent(name, kind, intervals))
        else:
            entries.append((index, (name, first, last, parent, kind, own, items, tuple(intervals))))
    entries.sort(key=operator.itemgetter(0))
    position = {index: n for n, (index, _) in enumerate(entries)}
    return tuple(
        StageRecord(name, start, end, parent if parent < 0 else position.get(parent, -1), kind, own, items, intervals)
        for _, (name, start, end, parent, kind, own, items, intervals) in entries
    )


def _stage_records_function() -> Callable[[list[Finished], dict[str, list[Any]]], tuple[StageRecord, ...]]:
    from ._backend import ACTIVE  # here: _backend imports this module

    if ACTIVE.speedups is None:
        return _stage_records_python
    build = ACTIVE.speedups.stage_records
    fields = tuple(field.name for field in dataclasses.fields(StageRecord))

    def c_stage_records(finished: list[Finished], generators: dict[str, list[Any]]) -> tuple[StageRecord, ...]:
        stages: tuple[StageRecord, ...] = build(
            finished if isinstance(finished, list) else list(finished), generators, StageRecord, fields
        )
        return stages

    return c_stage_records


_stage_records: Callable[[list[Finished], dict[str, list[Any]]], tuple[StageRecord, ...]] | None = None


# Stage kinds whose calls each carry their parent, last: the layout of one call.
_CALLS: dict[StageKind, tuple[str, ...]] = {"sum": SUM_CALL, "thread": THREAD_CALL}


def _per_parent(name: str, kind: StageKind, calls: list[int]) -> list[_Row]:
    """A sum or thread stage's calls, one stage per parent they ran under;
    the record's ``intervals`` keep each call's other values."""
    size = len(_CALLS[kind])
    by_parent: dict[int, list[int]] = {}
    for i in range(0, len(calls) - size + 1, size):
        by_parent.setdefault(calls[i + size - 1], []).extend(calls[i : i + size - 1])
    stages: list[_Row] = []
    for parent, flat in by_parent.items():
        width = size - 1
        starts, ends = flat[0::width], flat[1::width]
        # A sum stage's own time is its calls' durations; a thread stage's, the threads' CPU (its duration is the calls' wall time).
        own = sum(flat[2::width]) if kind == "thread" else sum(ends) - sum(starts)
        stages.append((name, min(starts), max(ends), parent, kind, own, len(starts), tuple(flat)))
    return stages


def current_timeline() -> Timeline | None:
    """The timeline of the request being served in this context, if any."""
    return read_timeline()
