# What the C accelerator (csrc/) exports. Each type's Python reference is named
# in its docstring; setup()'s hooks are declared once, in _layouts.Hooks.
import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import CodeType, FrameType, TracebackType
from typing import Any, TypeVar, final

from typing_extensions import Unpack

from .._export._split import Split as _Split
from ..types import Message, Receive, Scope, Send, StageRecord
from ._layouts import Hooks, Span
from ._timeline import Timeline as _Timeline
from ._timeline import _TimelineFields

_T = TypeVar("_T")

def setup(**hooks: Unpack[Hooks]) -> None: ...
def set_clock(clock: Callable[[], int] | None) -> Callable[[], int] | None: ...
def now_ns() -> int: ...
def format_ms(ns: int) -> str: ...
def encode_record(timeline: _Timeline) -> bytes | None: ...
def json_has_token(data: bytes) -> bool | None: ...
def split_windows(steps: list[int], windows: list[int], calls: list[int] = ..., cls: type[_T] = ...) -> list[_T]: ...
def instances(cls: type[_T], fields: tuple[str, ...], rows: list[tuple[Any, ...]]) -> tuple[_T, ...]: ...
def stage_spans(
    stages: tuple[StageRecord, ...],
    durations: list[int],
    own: list[int],
    splits: list[_Split] | None,
    ids: list[str],
    trace_id: str,
    server_id: str,
    anchor_ns: int,
    end_ns: int,
    keys: tuple[str, ...],
) -> list[Span]: ...
def encode_spans(spans: list[Span]) -> bytes | None: ...
def scan_headers(headers: Any) -> int: ...

class Timeline(_TimelineFields):
    def __init__(self, start_ns: int, method: str = ..., path: str = ...) -> None: ...

class Stage:
    name: str
    index: int
    start_ns: int
    def __init__(self, name: str) -> None: ...
    def __enter__(self) -> Stage: ...
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

class Exchange:
    def __init__(self, middleware: Any, scope: Scope, timeline: _Timeline, receive: Receive, send: Send) -> None: ...
    def send(self, message: Message) -> Awaitable[None]: ...
    def record(self, message: Message) -> Message: ...
    def finish(self) -> None: ...

@final
class Handoff:
    pending: int
    dropped: int
    def __init__(self, max_records: int, capacity: int, wake: Callable[[], object]) -> None: ...
    def submit(self, timeline: _Timeline) -> None: ...
    def append(self, record: bytes) -> None: ...
    def write_frame(self, fd: int, anchor: int) -> int: ...

@final
class Passage:
    def __call__(self, message: Message) -> Awaitable[None]: ...
    def send(self, message: Message) -> Awaitable[None]: ...
    def close(self, scope: Scope, error: str | None) -> None: ...

@final
class Tally:
    requests: int
    max_series: int
    def __init__(
        self,
        known_methods: frozenset[str],
        other: str,
        unmatched_route: str,
        incomplete_response: str,
        max_series: int,
    ) -> None: ...
    def add(
        self,
        method: str,
        route: str,
        status: int,
        error: str,
        streaming: bool,
        recorded: bool,
        duration_ns: int,
        ttft_ns: int,
    ) -> None: ...
    def passage(self, method: str, send: Send) -> Passage: ...
    def series(self) -> list[tuple[tuple[str, str, int, str, bool, bool], tuple[int, ...]]]: ...
    def clear(self) -> None: ...

@final
class Batches:
    loop: asyncio.AbstractEventLoop
    context: contextvars.Context
    start_ns: int
    previous_ns: int
    steps: int  # request steps since the marker was queued
    armed: bool
    thread_cpu: bool  # each step's CPU from the thread's CPU clock (PERFKIT_STEPS=cpu)
    end_ns: int  # PERFKIT_STEPS=cpu: when the last step ended,
    cpu_end_ns: int  # the thread's CPU clock then (-1: none yet),
    claimed_ns: int  # the CPU a stage named since then,
    running: int  # and the steps running now
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None: ...
    def mark(self) -> None: ...
    def arm(self, now: int) -> None: ...

@final
class StepClock:
    def __init__(self, awaitable: Awaitable[Any], steps: list[int], batches: Batches, ready_ns: int = ...) -> None: ...
    def __await__(self) -> Generator[Any, Any, Any]: ...
    def send(self, value: Any) -> Any: ...
    def throw(self, *args: Any) -> Any: ...
    def close(self) -> None: ...
    # What asyncio and inspect read of a coroutine.
    __name__: str
    __qualname__: str
    cr_running: bool
    cr_frame: FrameType | None
    cr_code: CodeType | None
    cr_await: Any
    cr_origin: Any
    cr_suspended: bool

@final
class TaskFactory:
    def __init__(self, previous: Any, batches: Any, clock_class: type[StepClock]) -> None: ...
    def __call__(
        self, loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]: ...
