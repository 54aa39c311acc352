"""Wrapping functions where they are looked up, and undoing it."""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from .._core import Stage
from .._core._after import expect
from .._core._context import read_timeline, reset_timeline, set_timeline
from .._core._guard import internal_error
from .._core._protocol import parsing
from .._core._stage import _timed_generator
from .._core._threads import in_thread
from ._points import Point, PointKind
from ._transport import awaited_stage, body_stream, body_wait, outbound

__all__ = ["Applied", "apply_point", "make_wrapper"]

Restore = Callable[[], None]
Applied = tuple[Point, Restore]
_TRANSPORT_KINDS: dict[PointKind, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "outbound": outbound,
    "body_wait": body_wait,
    "body_stream": body_stream,
}


def make_wrapper(
    point: Point, original: Callable[..., Any], then: Callable[[], None] | None = None
) -> Callable[..., Any]:
    """The wrapper for ``point``; a ``routes_added`` point calls ``then`` after each call."""
    stage = point.stage
    if point.kind == "routes_added":
        assert then is not None
        wrapper: Callable[..., Any] = _then(Stage(stage)(original), then)
    elif point.kind == "stream":
        wrapper = _stream(original, stage)
    elif point.kind in _TRANSPORT_KINDS:
        wrapper = _TRANSPORT_KINDS[point.kind](original)
    elif point.kind == "route":
        wrapper = awaited_stage(original, stage)
    elif point.kind == "metrics_app":
        wrapper = _with_perfkit_metrics(original)
    elif point.kind == "deferred":
        wrapper = _deferred(original)
    elif point.kind == "detached":
        wrapper = _detached(original)
    elif point.kind == "thread":
        wrapper = _to_thread(original)
    elif point.kind == "protocol":
        wrapper = parsing(original, _uvicorn_request)
    elif point.kind == "sum":
        wrapper = Stage._summed(stage, original)
    else:
        wrapper = Stage(stage)(original)
    functools.update_wrapper(wrapper, original)
    wrapper.__perfkit_original__ = original  # type: ignore[attr-defined]
    return wrapper


def _stream(original: Callable[..., Any], stage: str) -> Callable[..., Any]:
    """The proxy's streaming generator, its own time recorded as ``stage``, a ``generator`` stage."""

    def stream_wrapper(*args: Any, **kwargs: Any) -> Any:
        generator = original(*args, **kwargs)
        timeline = read_timeline()
        if timeline is None or not inspect.isasyncgen(generator):
            return generator
        return _timed_generator(stage, generator, timeline, stream_attributes=True)

    return stream_wrapper


def _with_perfkit_metrics(original: Callable[..., Any]) -> Callable[..., Any]:
    def make_app(*args: Any, **kwargs: Any) -> Any:
        try:
            from .._export._prometheus import add_to_registry

            add_to_registry(args[0] if args else kwargs.get("registry"))
        except Exception as exc:  # LiteLLM's /metrics is served without perfkit's families
            internal_error("litellm.metrics", exc)
        return original(*args, **kwargs)

    return make_app


def _deferred(original: Callable[..., Any]) -> Callable[..., Any]:
    """Queues a coroutine for a worker task: the request's hand-off waits for that task (_core/_after.py)."""

    def queue(*args: Any, **kwargs: Any) -> Any:
        timeline = read_timeline()
        if timeline is not None:
            try:
                coroutine = next((a for a in (*args, *kwargs.values()) if asyncio.iscoroutine(a)), None)
                if coroutine is not None:
                    expect(timeline, coroutine)
            except Exception as exc:  # perfkit's bug must never become the app's
                internal_error("litellm.deferred", exc)
        return original(*args, **kwargs)

    return queue


def _detached(original: Callable[..., Any]) -> Callable[..., Any]:
    """Starts a long-lived task: outside the request's context, so that it is not clocked into the first request."""

    def start(*args: Any, **kwargs: Any) -> Any:
        if read_timeline() is None:
            return original(*args, **kwargs)
        token = set_timeline(None)
        try:
            return original(*args, **kwargs)
        finally:
            reset_timeline(token)

    return start


def _to_thread(original: Callable[..., Any]) -> Callable[..., Any]:
    """Hands its first callable argument to a thread: that call's CPU there is the request's (_core/_threads.py)."""

    def hand_over(*args: Any, **kwargs: Any) -> Any:
        if read_timeline() is not None:
            for n, argument in enumerate(args):
                if callable(argument):
                    args = (*args[:n], in_thread(argument), *args[n + 1 :])
                    break
        return original(*args, **kwargs)

    return hand_over


def _uvicorn_request(protocol: Any) -> object:
    """The request a uvicorn HTTP protocol is parsing: its cycle, until the response is complete."""
    cycle = getattr(protocol, "cycle", None)
    return None if cycle is None or getattr(cycle, "response_complete", True) else cycle


def _then(timed: Callable[..., Any], then: Callable[[], None]) -> Callable[..., Any]:
    async def call_then(*args: Any, **kwargs: Any) -> Any:
        try:
            return await timed(*args, **kwargs)
        finally:
            try:
                then()
            except Exception as exc:  # perfkit's bug must never become the app's
                internal_error("litellm.routes_added", exc)

    return call_then


def apply_point(point: Point, then: Callable[[], None] | None = None) -> Applied | str:
    """Wrap one point; the reason as text when it cannot be found."""
    try:
        module = importlib.import_module(point.module)
    except Exception as exc:  # an optional provider or an older layout
        return f"{point.target} (cannot import {point.module}: {type(exc).__name__})"
    owner: Any = module
    name = point.attribute
    if "." in name:
        class_name, name = name.split(".", 1)
        owner = getattr(module, class_name, None)
        if owner is None:
            return f"{point.target} (no class {class_name})"
    raw = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    if raw is None and isinstance(owner, type):
        raw = getattr(owner, name, None)  # inherited
    if raw is None:
        return f"{point.target} (not found)"
    function = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    if not callable(function):
        return f"{point.target} (not callable)"
    if hasattr(function, "__perfkit_original__"):
        return f"{point.target} (already wrapped)"
    wrapper = make_wrapper(point, function, then)
    replacement: Any = type(raw)(wrapper) if isinstance(raw, (staticmethod, classmethod)) else wrapper
    setattr(owner, name, replacement)

    def restore() -> None:
        setattr(owner, name, raw)

    return point, restore
