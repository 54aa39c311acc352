"""The records that cross between perfkit's Python and its C accelerator, each declared once.

- ``Span``: a span as the exporters take it (built by ``_export/_spans.py``
  and C's ``stage_spans``, read by the OTLP encoders, Python's and C's).
- The frames to the export agent (``FRAME_HEAD``, ``BATCH_HEAD``,
  ``RECORD_HEAD``; written by ``_export/_frames.py`` and C's ``Handoff``).
- The traffic frame (``TRAFFIC_HEAD``, ``TRAFFIC_SERIES``; written by
  ``_export/_traffic.py`` from the tally's series) and the histogram bucket
  bounds (``BOUNDARIES_NS``) that the tally, C's and Python's, and the
  metrics share.
- ``Hooks``: what the C module's ``setup()`` takes from Python.
- The headers C reads and writes, and the content types it reads, are
  declared in ``_wire/_names.py`` (``C_HEADERS``, ``C_CONTENT_TYPES``);
  ``c_header`` is handed them.

The timeline and its stage entries are declared in ``_fields.py``. From
these declarations ``c_header`` writes the C accelerator's names for them
(``perfkit_layouts.h``, written by setup.py at build time), so C reads
``PK_SPAN_NAME``, not ``3``.

This module imports nothing of perfkit's at run time: setup.py loads it by
path, before the package can be imported.
"""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypedDict

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Coroutine, Mapping
    from contextvars import ContextVar, Token
    from types import ModuleType

    from ..types import AttributeValue
    from ._gcwatch import GcWatch
    from ._stage import _PyStage
    from ._timeline import Timeline

__all__ = [
    "BATCH_HEAD",
    "BOUNDARIES_NS",
    "FRAME_HEAD",
    "RECORD_HEAD",
    "TRAFFIC_HEAD",
    "TRAFFIC_SERIES",
    "FrameKind",
    "Hooks",
    "Span",
    "c_header",
]


class Span(NamedTuple):
    """One span, as every exporter takes it. A tuple (C builds it as one, and
    the OTLP encoders read it by position), named for Python readers."""

    trace_id: str  # hex, 32 digits
    span_id: str  # hex, 16 digits
    parent_span_id: str  # hex, or "" for a root
    name: str
    kind: int  # SPAN_KIND_SERVER or SPAN_KIND_INTERNAL (_export/_spans.py)
    start_unix_ns: int
    end_unix_ns: int
    attributes: list[tuple[str, AttributeValue]]
    status_code: int  # STATUS_UNSET or STATUS_ERROR
    status_message: str


# -- frames to the export agent (little-endian) -----------------------------
class FrameKind:
    """A frame's first byte."""

    BATCH: Final = b"B"  # payload: BATCH_HEAD, then each record as RECORD_HEAD and its Timeline.encode bytes
    FLUSH: Final = b"F"  # empty payload: export now, and answer with a stats line
    TRAFFIC: Final = b"T"  # payload: TRAFFIC_HEAD, then per series TRAFFIC_SERIES, its labels (UTF-8), its counts


FRAME_HEAD = struct.Struct("<cI")
"""Every frame's head: its kind (FrameKind), its payload's length."""
BATCH_HEAD = struct.Struct("<qQ")
"""A batch's head: the anchor (perf_counter_ns to Unix ns), the app's count of dropped requests."""
RECORD_HEAD = struct.Struct("<I")
"""Before each record of a batch: its length."""
TRAFFIC_HEAD = struct.Struct("<QI")
"""A traffic frame's head: requests tallied so far, series that follow."""
TRAFFIC_SERIES = struct.Struct("<iBBHHH")
"""A series' head: status code, streaming, recorded, then the lengths of its
method, route and error type (UTF-8 bytes, in that order, right after it),
then its counts: ``len(BOUNDARIES_NS) * 2 + 10`` little-endian u64 (``_traffic``)."""

TRAFFIC_HEAD_COUNTS = 8
"""A series' counts before its buckets: the duration's count, sum, min and max, then the TTFT's."""

# Histogram bucket upper bounds (inclusive), ns. Fine at the low end:
# gateway stages take tens of microseconds.
BOUNDARIES_NS: tuple[int, ...] = tuple(
    int(ms * 1_000_000)
    for ms in (
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        2.5,
        5,
        10,
        25,
        50,
        75,
        100,
        250,
        500,
        750,
        1000,
        2500,
        5000,
        7500,
        10000,
    )
)


class Hooks(TypedDict):
    """What the C module's ``setup()`` takes from Python, once (``_backend``): one keyword each, in this order."""

    timeline_var: ContextVar[Timeline | None]
    open_stage_var: ContextVar[_PyStage | None]
    internal_error: Callable[[str, BaseException], None]
    closed_by_collector: Callable[[type[BaseException] | None], bool]
    gc_watch: GcWatch  # .total_ns: the collector's running pause total
    entry_prefixes: dict[str, str]  # stage name -> "token;dur="
    entry_prefix: Callable[[str], str]  # fills entry_prefixes
    data_has_token: Callable[[bytes], bool]
    token_hints: tuple[bytes, ...]  # an event without any of them carries no output
    chat_output_keys: tuple[str, ...]  # the chat delta keys that carry output
    sink_module: ModuleType  # its .sink(timeline) takes finished timelines
    default_clock: Callable[[], int]  # time.perf_counter_ns, where C has no equal clock
    timeline_defaults: tuple[tuple[bool, Any], ...]  # (factory, value) per object field of the timeline
    host_stage_enter: Callable[[Any], Token[Any] | None]  # the stage as the host's current span
    host_stage_exit: Callable[[Token[Any]], None]
    step_values: int  # _steps.STEP_SIZE * MAX_STEPS
    event_loop_stage: str  # _wire._names.EVENT_LOOP_STAGE: PERFKIT_STEPS=cpu charges the loop's CPU between steps to it
    loop_idle_ns: int  # _steps.LOOP_IDLE_NS: a longer gap between steps is charged to no one
    loop_entry: Callable[[Timeline, int], list[Any]]  # _steps.loop_entry: a request's new event_loop stage
    task_type: type[asyncio.Task[Any]]
    iscoroutine: Callable[[object], bool]  # for what is not a native coroutine
    expected: dict[Coroutine[Any, Any, Any], Timeline]  # _after's: a queued coroutine -> its request
    tasks_ended: Callable[[Timeline], None]  # _after's: the last task of a request handed off while held ended
    span_type: type[Span]  # what stage_spans builds


# -- the C accelerator's view ------------------------------------------------
# A hook of these annotations is type-checked by setup() (PyArg_Parse's "O!").
_HOOK_CHECKS = {"dict": "PyDict_Type", "tuple": "PyTuple_Type", "int": "PyLong_Type", "str": "PyUnicode_Type"}
# What handoff.c writes: a kind byte, then u32 and 64-bit little-endian numbers.
_C_WRITES = {FRAME_HEAD: "<cI", BATCH_HEAD: "<qQ", RECORD_HEAD: "<I"}


def _hook_check(annotation: object) -> str | None:
    """The C type setup() checks a hook of this annotation against: a string, or a
    ForwardRef of one (TypedDict wraps postponed annotations)."""
    forward = getattr(annotation, "__forward_arg__", None)
    text = forward if isinstance(forward, str) else str(annotation)
    return _HOOK_CHECKS.get(text.split("[", 1)[0].strip())


def _frame_lines() -> list[str]:
    for layout, written in _C_WRITES.items():
        if layout.format != written:
            raise ValueError(f"handoff.c writes {written!r} frames, not {layout.format!r}")
    return [
        f"#define PK_FRAME_BATCH '{FrameKind.BATCH.decode()}'",
        f"#define PK_FRAME_LENGTH_AT {struct.calcsize('<c')}",
        f"#define PK_FRAME_HEAD_SIZE {FRAME_HEAD.size}",
        f"#define PK_BATCH_ANCHOR_AT {FRAME_HEAD.size}",
        f"#define PK_BATCH_DROPPED_AT {FRAME_HEAD.size + struct.calcsize('<q')}",
        f"#define PK_BATCH_HEADER_SIZE {FRAME_HEAD.size + BATCH_HEAD.size} /* the frame's head and the batch's */",
        f"#define PK_RECORD_HEAD_SIZE {RECORD_HEAD.size}",
    ]


def _name_lines(prefix: str, names: Mapping[str, str], spelling: str, what: str) -> list[str]:
    lines = []
    for key, name in names.items():
        if not re.fullmatch(spelling, name):
            raise ValueError(f"C spells {what} as lowercase token bytes; {name!r} is not one")
        lines += [f'#define {prefix}{key} "{name}"', f"#define {prefix}{key}_LEN {len(name)}"]
    return lines


def c_header(headers: Mapping[str, str], content_types: Mapping[str, str]) -> str:
    """C names for the layouts: positions in a span, the batch frame, setup()'s hooks,
    the headers C reads and writes and the content types it reads (``headers``,
    ``content_types``: ``_wire/_names.C_HEADERS``, ``C_CONTENT_TYPES``, handed in
    because this module imports nothing of perfkit's)."""
    hooks = list(Hooks.__annotations__.items())
    checks = [_hook_check(annotation) for _, annotation in hooks]
    parse_args = [
        f"&{check}, &(h).{name}" if check else f"&(h).{name}" for (name, _), check in zip(hooks, checks, strict=True)
    ]
    form = "$" + "".join("O!" if check else "O" for check in checks)
    return "\n".join(
        [
            "/* Generated by setup.py from _core/_layouts.py: do not edit. */",
            "#ifndef PERFKIT_LAYOUTS_H",
            "#define PERFKIT_LAYOUTS_H",
            "",
            "/* Positions in a span (_layouts.Span). */",
            *(f"#define PK_SPAN_{name.upper()} {i}" for i, name in enumerate(Span._fields)),
            f"#define PK_SPAN_SIZE {len(Span._fields)}",
            "",
            "/* The export agent's batch frame (_layouts.FRAME_HEAD, BATCH_HEAD, RECORD_HEAD). */",
            *_frame_lines(),
            "",
            "/* Histogram bucket upper bounds in ns (_layouts.BOUNDARIES_NS): bucket i holds (bound[i-1], bound[i]]. */",
            f"#define PK_BOUNDARY_COUNT {len(BOUNDARIES_NS)}",
            f"#define PK_TRAFFIC_HEAD_COUNTS {TRAFFIC_HEAD_COUNTS} /* a series' count, sum, min, max: duration's, then TTFT's */",
            "#define PK_BOUNDARIES_NS {" + ", ".join(f"{b}LL" for b in BOUNDARIES_NS) + "}",
            "",
            "/* The headers C reads and writes (_wire/_names.C_HEADERS): the name, and its length. */",
            # As ASGI carries them: lowercase, and nothing C would need to escape.
            *_name_lines("PK_HEADER_", headers, r"[a-z0-9-]+", "header names"),
            "",
            "/* The content types C reads (_wire/_names.C_CONTENT_TYPES): the type, and its length. */",
            *_name_lines("PK_CONTENT_TYPE_", content_types, r"[a-z0-9.+-]+/[a-z0-9.+-]+", "content types"),
            "",
            "/* setup()'s hooks (_layouts.Hooks), in keyword order: X(name). */",
            "#define PK_HOOKS(X) \\\n    " + " \\\n    ".join(f"X({name})" for name, _ in hooks),
            "/* PyArg_ParseTupleAndKeywords's format and arguments for them, into the PkHooks h. */",
            f'#define PK_HOOKS_FORMAT "{form}:setup"',
            "#define PK_HOOKS_PARSE_ARGS(h) \\\n    " + ", \\\n    ".join(parse_args),
            "",
            "#endif",
            "",
        ]
    )
