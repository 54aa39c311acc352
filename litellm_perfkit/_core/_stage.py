"""``stage(name)``: a context manager and decorator that records one named stage.

Outside a request (no timeline in the context) every path is one ContextVar
lookup and a return. Inside a request it costs two clock reads and one small
object. ``__init__``, ``__enter__`` and ``__exit__`` come from the C
accelerator when it runs, or from ``_PyStage``, their reference; ``_backend``
puts the methods here on top of either.

While a stage is open, it is its task's open stage (``OPEN_STAGE``, per
task context; the task's StepClock in C): its ``index`` is the parent of what
opens inside it, and ``open_stage()`` gives a profiler the stage the running
task is in.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from time import perf_counter_ns
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from .._wire._names import Attr
from ._collector import closed_by_collector, reset_unless_collected, set_outside_collection
from ._context import open_stage, read_timeline
from ._guard import internal_error
from ._hosttrace import HOST_TRACING
from ._steps import FINISHED, StepDriver
from ._timeline import OPEN_STAGE, Timeline

__all__ = ["Stage", "_PyStage", "open_stage"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
_S = TypeVar("_S", bound="_PyStage")


class _PyStage:
    """``Stage``'s recording core in Python: the reference for the C one."""

    __slots__ = ("name", "index", "start_ns", "_timeline", "_parent", "_enclosing", "_host")

    def __init__(self, name: str) -> None:
        self.name = name
        self.index = -1  # set while recording, and kept: tasks started inside the stage nest under it
        self._timeline: Timeline | None = None

    def __enter__(self: _S) -> _S:
        timeline = read_timeline()
        if timeline is not None:
            try:
                index = timeline.next_index
                timeline.next_index = index + 1
                enclosing = OPEN_STAGE.get()
                self._parent = -1 if enclosing is None else enclosing.index
                self._enclosing = enclosing
                # No token kept: exit sets the enclosing stage back (csrc/stage.c says why).
                set_outside_collection(OPEN_STAGE, self)
                self.index = index
                self.start_ns = perf_counter_ns()
                self._timeline = timeline
                # The host traces this request: the stage is its current span while open.
                self._host = None if timeline.span_context is None else HOST_TRACING.enter_stage(self)
            except Exception as exc:  # perfkit's bug must never become the app's
                internal_error("stage.enter", exc)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        timeline = self._timeline
        if timeline is not None:
            if exc_type is not None and closed_by_collector(exc_type):
                self._timeline = self._enclosing = None
                return  # garbage being closed, in another context: touch nothing (see _collector)
            try:  # a finished stage is _fields.FINISHED
                timeline.finished.append((self.index, self.name, self.start_ns, perf_counter_ns(), self._parent))
            except Exception as exc:
                internal_error("stage.exit", exc)
            host = getattr(self, "_host", None)
            if host is not None:
                HOST_TRACING.exit_stage(host)
                self._host = None
            # The enclosing stage is open again, recorded or not, in the context the stage exits in (another
            # than it entered in when a generator moved between tasks).
            set_outside_collection(OPEN_STAGE, self._enclosing)
            self._timeline = self._enclosing = None


if TYPE_CHECKING:
    _StageCore = _PyStage
else:
    _StageCore = object


class Stage(_StageCore):
    """Record a named stage of the current request.

    ``with stage("auth"): ...``, ``async with stage("auth"): ...``, or as a
    decorator on a sync function, an async function or an async generator
    function. On an async generator it records the time spent in the
    generator's own code (time suspended waiting on others excluded) and the
    number of items it yielded, summed per request.

    Use one instance per ``with`` block; as a decorator the instance only
    holds the name, so it may be shared.
    """

    __slots__ = ()

    async def __aenter__(self) -> Stage:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # The C accelerator's decorator (csrc/staged.c), set on the backend's class only: a subclass's own
    # __enter__ and __exit__ are called by the Python wrappers below, their reference.
    _staged: ClassVar[Callable[..., Any] | None] = None

    def __call__(self, func: F) -> F:
        name = self.name
        new = type(self)
        if inspect.isasyncgenfunction(func):
            return cast(F, _wrap_async_generator(name, func))
        is_async = inspect.iscoroutinefunction(func)
        staged = new.__dict__.get("_staged")
        if staged is not None:
            return cast(F, _like(staged(name, func, is_async), func, is_async))
        if is_async:
            # __enter__ and __exit__ called as methods, not by `with`: `with` binds __exit__ to the stage and
            # holds it across the call's awaits, a tracked object per open stage for a served proxy's
            # collections to promote (docs/overhead.md#allocations).
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                if read_timeline() is None:
                    return await func(*args, **kwargs)
                block = new(name)
                block.__enter__()
                try:
                    result = await func(*args, **kwargs)
                except BaseException as exc:
                    block.__exit__(type(exc), exc, exc.__traceback__)
                    raise
                block.__exit__(None, None, None)
                return result

            return cast(F, async_wrapper)

        @functools.wraps(func)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            if read_timeline() is None:
                return func(*args, **kwargs)
            with new(name):  # a sync call holds the bound __exit__ only while it runs, with no await
                return func(*args, **kwargs)

        return cast(F, sync_wrapper)

    @classmethod
    def _summed(cls, name: str, func: F) -> F:
        """``func`` (async or not), its calls in a request summed into one ``sum`` stage ``name``: for a
        function called per chunk or many times a request, where a stage per call would cost more than
        it tells. The LiteLLM instrumentation's ``sum`` points; not public API."""
        is_async = inspect.iscoroutinefunction(func)
        staged = cls.__dict__.get("_staged")
        if staged is not None:
            return cast(F, _like(staged(name, func, is_async, "sum"), func, is_async))
        if is_async:

            @functools.wraps(func)
            async def sum_async(*args: Any, **kwargs: Any) -> Any:
                timeline = read_timeline()
                if timeline is None:
                    return await func(*args, **kwargs)
                started = perf_counter_ns()
                try:
                    return await func(*args, **kwargs)
                finally:
                    _add_sum_call(timeline, name, started)

            return cast(F, sum_async)

        @functools.wraps(func)
        def sum_sync(*args: Any, **kwargs: Any) -> Any:
            timeline = read_timeline()
            if timeline is None:
                return func(*args, **kwargs)
            started = perf_counter_ns()
            try:
                return func(*args, **kwargs)
            finally:
                _add_sum_call(timeline, name, started)

        return cast(F, sum_sync)


def _add_sum_call(timeline: Timeline, name: str, started: int) -> None:
    try:
        timeline.add_generator_time(name, started, perf_counter_ns() - started, 1, "sum")
    except Exception as exc:  # perfkit's bug must never become the app's
        internal_error("stage.sum", exc)


async def _summed_call(name: str, awaitable: Awaitable[T], flag: ContextVar[bool]) -> T:
    """``awaitable`` as one call of the sum stage ``name`` in the current request (timed from its first
    step to its last), with ``flag`` True meanwhile; itself outside a request. The reference of the C
    accelerator's ``summed_call``: one object, no coroutine frame."""
    timeline = read_timeline()
    if timeline is None:
        return await awaitable
    token = set_outside_collection(flag, True)
    try:
        started = perf_counter_ns()
        try:
            return await awaitable
        finally:
            _add_sum_call(timeline, name, started)
    finally:
        reset_unless_collected(flag, token)


# The reference, or the C accelerator's (use_speedups): callers read it through the module.
summed_call: Callable[[str, Awaitable[Any], ContextVar[bool]], Awaitable[Any]] = _summed_call


def _like(wrapper: Any, func: Callable[..., Any], is_async: bool) -> Any:
    """The C decorator's function made to look like ``func`` as a Python wrapper would: its name, doc and
    ``__wrapped__``; an async one a coroutine function to asyncio and inspect, which on Python < 3.12
    reads a function's code flags: the function's code and defaults are lent for that."""
    functools.update_wrapper(wrapper, func)
    if is_async:
        wrapper._is_coroutine = _ASYNCIO_MARKER  # asyncio.iscoroutinefunction, which FastAPI asks on 3.11-3.12
        if _MARK_COROUTINE is not None:
            _MARK_COROUTINE(wrapper)
        else:
            for attribute in ("__code__", "__defaults__", "__kwdefaults__"):
                setattr(wrapper, attribute, getattr(func, attribute, None))
    return wrapper


_ASYNCIO_MARKER = getattr(asyncio.coroutines, "_is_coroutine", None)
_MARK_COROUTINE = getattr(inspect, "markcoroutinefunction", None)


class _Timed(StepDriver):
    """Adds the time of each step of what it drives to ``own_ns``: time suspended (the event loop serving
    others, I/O waits) is not counted, which is what "the generator's own code" means.

    One serves a whole generator: each item's ``__anext__()`` is its ``awaitable`` in turn (an object per
    item cost more than the step's call). ``max_gap_ns`` is the longest time from one item (or the
    start) to the next."""

    __slots__ = ("own_ns", "max_gap_ns", "_last_ns")

    def __init__(self) -> None:
        self.own_ns = self.max_gap_ns = 0
        self._last_ns = perf_counter_ns()  # the start, then when the last item came

    def _step(self, resume: Callable[[Any], Any], value: Any) -> Any:
        started = perf_counter_ns()
        try:
            return resume(value)
        except StopIteration as stop:
            self.result = stop.value
            item_ns = perf_counter_ns()
            self.max_gap_ns = max(self.max_gap_ns, item_ns - self._last_ns)
            self._last_ns = item_ns
            return FINISHED
        finally:
            self.own_ns += perf_counter_ns() - started


# What times a generator's steps: _Timed, or the C accelerator's OwnTime (use_speedups).
_own_time: Callable[[], Any] = _Timed


def use_speedups(speedups: Any) -> None:
    """Timed async generators driven by the C accelerator's ``OwnTime``, summed calls by its ``summed_call``."""
    global _own_time, summed_call
    _own_time, summed_call = speedups.OwnTime, speedups.summed_call


def _wrap_async_generator(
    name: str, func: Callable[..., AsyncGenerator[Any, Any]]
) -> Callable[..., AsyncGenerator[Any, Any]]:
    # A plain function, so that outside a request the caller gets the original
    # generator back with no extra layer per item.
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        generator = func(*args, **kwargs)
        timeline = read_timeline()
        if timeline is None:
            return generator
        return _timed_generator(name, generator, timeline)

    return wrapper


async def _timed_generator(
    name: str, generator: AsyncGenerator[Any, Any], timeline: Timeline, stream_attributes: bool = False
) -> AsyncGenerator[Any, Any]:
    """Yields what ``generator`` yields; records its own time as ``name``
    (time suspended inside a step, waiting on what it awaits, excluded) and,
    with ``stream_attributes``, the number of items and the longest gap
    between two (``perfkit.stream.chunks``, ``perfkit.stream.max_gap_ms``)."""
    first_ns = perf_counter_ns()
    items = 0
    timed = _own_time()
    try:
        while True:
            timed.awaitable = generator.__anext__()
            try:
                item = await timed
            except StopAsyncIteration:
                break
            items += 1
            yield item
    finally:
        timeline.add_generator_time(name, first_ns, timed.own_ns, items)
        if stream_attributes:
            timeline.attributes[Attr.STREAM_MAX_GAP_MS] = round(timed.max_gap_ns / 1e6, 3)
            timeline.attributes[Attr.STREAM_CHUNKS] = items
        await generator.aclose()
