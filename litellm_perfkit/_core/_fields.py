"""The timeline's fields, derived from their one declaration.

``types.RequestRecord`` declares them: every field of the record except the
derived ``stages`` is also a field of the request's timeline, recorded on the
hot path in that shape. The fields only the timeline has (the stages as the
hot path keeps them, counters, a flag) are declared here (``INTERNAL``). From both come the
Python timeline's slots and constructor, the hand-off encoding's field order,
the decoding into ``RequestRecord``, and the C accelerator's struct, member
table, constructor, traverse and clear (``c_header``, written by setup.py at
build time). Adding a field to ``RequestRecord`` adds it everywhere.

This module imports nothing of perfkit's: setup.py loads it, and types.py,
by path, before the package can be imported.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "CONSTRUCTOR",
    "Field",
    "FINISHED",
    "GENERATOR",
    "GeneratorEntry",
    "INTERNAL",
    "SUM_CALL",
    "THREAD_CALL",
    "Layout",
    "c_header",
    "layout",
    "position_names",
]

Kind = Literal["int64", "bool", "ssize", "object"]
CList = Literal["list", "Int64List", "StageList"]
"""A list field's container in the C timeline: a list, or the accelerator's raw list of ints or of
finished stages (csrc/int64list.c, csrc/stagelist.c), read from Python as the list it stands for."""


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    default: Any = 0  # a constant, or a type called for a new value (dict, list)
    factory: bool = False
    nullable: bool = False  # an object field that may be None
    encoded: bool = True  # handed to the export side
    c_list: CList = "list"  # the container the C timeline keeps this list in, raw


# The timeline's own fields: the stages as the hot path keeps them (decoded
# into RequestRecord.stages), the next stage index, and its hand-off's hold
# (_after): the tasks not yet finished, and whether it was handed off while
# some ran.
INTERNAL = (
    Field("finished", "object", list, factory=True, c_list="StageList"),
    Field("generators", "object", dict, factory=True),
    Field("next_index", "ssize", encoded=False),
    Field("held_tasks", "ssize", encoded=False),
    Field("waiting", "bool", False, encoded=False),
)

CONSTRUCTOR = ("start_ns", "method", "path")
"""``Timeline(start_ns, method="", path="")``: the fields a new timeline is given."""

FINISHED = ("index", "name", "start_ns", "end_ns", "parent")
"""A finished block stage in ``Timeline.finished``: a tuple of these (the C timeline's StageList keeps
them raw and reads them as these tuples)."""


class GeneratorEntry:
    """Positions in a generator, sum or thread stage's entry in ``Timeline.generators[name]``,
    a list (``intervals``: a sum stage's calls, SUM_CALL each, flat; a thread stage's, THREAD_CALL each).

    Python reads ``entry[GeneratorEntry.SELF_NS]``; C reads ``PK_GENERATOR_SELF_NS`` (``c_header``).
    A plain class of ints: reading an IntEnum member cost ~0.4 us, this ~0.01 us (timeit, CPython 3.11)."""

    INDEX: Final = 0
    FIRST_NS: Final = 1
    LAST_NS: Final = 2
    PARENT: Final = 3
    SELF_NS: Final = 4
    ITEMS: Final = 5
    KIND: Final = 6
    INTERVALS: Final = 7

    @staticmethod
    def new(
        timeline: Any,
        name: str,
        kind: str,
        *,
        first_ns: int,
        last_ns: int,
        intervals: list[Any],
        parent: int = -1,
        self_ns: int = 0,
        items: int = 0,
    ) -> list[Any]:
        """A new entry, its fields by name (the one place that knows their order): ``timeline``'s stage
        ``name``, at its next index; with ``timeline`` None, an entry of no timeline yet (index -1)."""
        index = -1 if timeline is None else timeline.next_index
        entry = [index, first_ns, last_ns, parent, self_ns, items, kind, intervals]
        if timeline is not None:
            timeline.next_index = index + 1
            timeline.generators[name] = entry
        return entry


def position_names(positions: type) -> tuple[str, ...]:
    """The field names of a class of positions (as ``GeneratorEntry``), in order."""
    found = sorted((value, name.lower()) for name, value in vars(positions).items() if name.isupper())
    if [value for value, _ in found] != list(range(len(found))):
        raise ValueError(f"{positions.__name__}: positions must be 0, 1, 2, ... without gaps")
    return tuple(name for _, name in found)


GENERATOR = position_names(GeneratorEntry)
"""A generator or sum stage's entry: GeneratorEntry's names, in order."""
SUM_CALL = ("start_ns", "end_ns", "parent")
"""One call of a sum stage, flat in its ``intervals``."""
THREAD_CALL = ("start_ns", "end_ns", "cpu_ns", "parent")
"""One call a request handed to a thread (_threads.py), flat in its stage's ``intervals``."""


def _kind(annotation: str) -> tuple[Kind, bool, CList]:
    """The storage of a RequestRecord field from its annotation (a string:
    types.py has ``from __future__ import annotations``): its kind, whether
    it may be None, and its C container (a list of ints: an Int64List)."""
    text = annotation.replace(" ", "")
    if text == "int":
        return "int64", False, "list"
    if text == "bool":
        return "bool", False, "list"
    return "object", "|None" in text or "None|" in text, "Int64List" if text == "list[int]" else "list"


@dataclass(frozen=True)
class Layout:
    fields: tuple[Field, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def encoded(self) -> tuple[str, ...]:
        """The order of the hand-off encoding (_timeline.Timeline.encode)."""
        return tuple(f.name for f in self.fields if f.encoded)

    @property
    def record_fields(self) -> tuple[str, ...]:
        internal = {f.name for f in INTERNAL}
        return tuple(f.name for f in self.fields if f.name not in internal)


def layout(record: type) -> Layout:
    """The timeline's fields: ``record``'s (RequestRecord) but the derived ones, then INTERNAL."""
    fields = []
    for declared in dataclasses.fields(record):
        if declared.metadata.get("derived"):
            continue
        kind, nullable, c_list = _kind(str(declared.type))
        if declared.default_factory is not dataclasses.MISSING:
            fields.append(
                Field(
                    declared.name,
                    kind,
                    declared.default_factory,
                    factory=True,
                    nullable=nullable,
                    c_list=c_list,
                )
            )
            continue
        default = None if declared.default is dataclasses.MISSING else declared.default
        if kind != "object" and default not in (None, 0, False):
            raise ValueError(f"{record.__name__}.{declared.name}: a number or flag starts at 0 (or False)")
        if c_list != "list":
            raise ValueError(f"{record.__name__}.{declared.name}: a list of ints starts empty (default_factory=list)")
        fields.append(Field(declared.name, kind, default, nullable=nullable))
    return Layout((*fields, *INTERNAL))


# -- the C accelerator's view --------------------------------------------------
_C_TYPES = {"int64": "long long", "bool": "char", "ssize": "Py_ssize_t", "object": "PyObject *"}
_MEMBER_TYPES = {"int64": "T_LONGLONG", "bool": "T_BOOL", "ssize": "T_PYSSIZET"}


def c_header(fields: Layout) -> str:
    """X-macros over the fields for csrc/: the struct members, the member
    table, the constructor's defaults, and the encoding order.

    ``timeline_defaults`` (given to setup()) holds one (factory, value) pair
    per object field, in the order of PK_TIMELINE_OBJECTS."""
    objects = [f for f in fields.fields if f.kind == "object"]
    scalars = [f for f in fields.fields if f.kind != "object"]

    def macro(name: str, items: list[str]) -> str:
        body = " \\\n    ".join(items) if items else ""
        return f"#define {name}(X) \\\n    {body}\n"

    lines = [
        "/* Generated by setup.py from types.RequestRecord and _core/_fields.py: do not edit. */",
        "#ifndef PERFKIT_FIELDS_H",
        "#define PERFKIT_FIELDS_H",
        "",
        "/* X(name, C type, member type) for every number and flag. */",
        macro("PK_TIMELINE_SCALARS", [f"X({f.name}, {_C_TYPES[f.kind]}, {_MEMBER_TYPES[f.kind]})" for f in scalars]),
        "/* X(name, position in timeline_defaults, member type) for every object. */",
        macro(
            "PK_TIMELINE_OBJECTS",
            [f"X({f.name}, {i}, {'T_OBJECT' if f.nullable else 'T_OBJECT_EX'})" for i, f in enumerate(objects)],
        ),
        f"#define PK_TIMELINE_OBJECT_COUNT {len(objects)}",
        "",
        "/* The constructor's positional arguments, in order: X(name, kind). */",
        macro(
            "PK_TIMELINE_CONSTRUCTOR",
            [f"X({name}, {next(f.kind for f in fields.fields if f.name == name).upper()})" for name in CONSTRUCTOR],
        ),
        f"#define PK_TIMELINE_CONSTRUCTOR_COUNT {len(CONSTRUCTOR)}",
        "",
        "/* The hand-off encoding: X(name, kind), in Timeline.encode's order. */",
        macro("PK_TIMELINE_ENCODED", [f"X({f.name}, {f.kind.upper()})" for f in fields.fields if f.encoded]),
        f"#define PK_TIMELINE_ENCODED_COUNT {len(fields.encoded)}",
        "",
        "/* Positions in a finished stage's tuple and a generator stage's list. */",
        *(f"#define PK_FINISHED_{name.upper()} {i}" for i, name in enumerate(FINISHED)),
        f"#define PK_FINISHED_SIZE {len(FINISHED)}",
        *(f"#define PK_GENERATOR_{name.upper()} {i}" for i, name in enumerate(GENERATOR)),
        f"#define PK_GENERATOR_SIZE {len(GENERATOR)}",
        "/* A call's positions in a sum stage's intervals, and the size of one call in a sum or thread stage's;",
        " * a call's parent is its last value. */",
        *(f"#define PK_SUM_CALL_{name.upper()} {i}" for i, name in enumerate(SUM_CALL)),
        f"#define PK_SUM_CALL_SIZE {len(SUM_CALL)}",
        f"#define PK_THREAD_CALL_SIZE {len(THREAD_CALL)}",
        "",
        "#endif",
        "",
    ]
    return "\n".join(lines)
