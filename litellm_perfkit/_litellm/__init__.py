"""LiteLLM proxy instrumentation: per-stage timings without changing its code path.

perfkit registers no LiteLLM callback and sets no flag the proxy reads: it
adds PerfkitMiddleware to the proxy's app, around LiteLLM's middlewares,
and wraps the functions of the version's table (``_points``) where they are
looked up.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._core import PerfkitMiddleware, Stage, _middleware
from .._core._context import read_timeline
from .._core._guard import logger
from .._core._leave_out import leave_out
from .._wire._environment_variables import PERFKIT_EXTRA_STAGES
from .._wire._names import UPSTREAM_STAGES
from ..types import HeaderMode, Receive, Scope, Send
from ._autoload import on_import
from ._fastpath import FastPaths
from ._points import MIDDLEWARES, Point, table_for
from ._wrap import apply_point, make_wrapper

__all__ = ["InstrumentReport", "instrument", "uninstrument", "extra_points"]

Restore = Callable[[], None]


@dataclass
class InstrumentReport:
    version: str
    table: str
    instrumented: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


_state: dict[str, Any] = {}


def extra_points(text: str | None = None) -> tuple[Point, ...]:
    """Extra stages from ``PERFKIT_EXTRA_STAGES``: ``stage=module:attr[,stage2=module:Class.method]``,
    e.g. to time a custom hook of your own. Bad entries are reported as missing."""
    text = os.environ.get(PERFKIT_EXTRA_STAGES, "") if text is None else text
    points = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        stage, _, target = item.partition("=")
        points.append(Point(stage.strip() or "custom", target.strip()))
    return tuple(points)


def _dependants(dependant: Any) -> Any:
    yield dependant
    for sub in getattr(dependant, "dependencies", ()):
        yield from _dependants(sub)


def _routes(container: Any) -> Any:
    """Every route, through included routers: FastAPI >= 0.16x includes them
    lazily (``_IncludedRouter.original_router``), older ones copy them."""
    for route in getattr(container, "routes", ()):
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included)
        else:
            yield route


def _swap_depends(value: Any, original: Any, wrapper: Any) -> Any:
    if (
        getattr(value, "dependency", None) is original
        and dataclasses.is_dataclass(value)
        and not isinstance(value, type)
    ):
        return dataclasses.replace(value, dependency=wrapper)
    return value


def _wrap_dependency(app: Any, original: Any, wrapper: Any) -> tuple[int, list[Restore]]:
    """Replace the auth dependency of every route, everywhere FastAPI may
    read it: the built dependency trees (routes copied at include time), and
    the route's ``dependencies`` and the endpoint's ``Depends`` defaults
    (routes whose trees FastAPI builds lazily at first request). Every
    declaration gets the same wrapper, so FastAPI still runs it once."""
    restores: list[Restore] = []
    routes = 0
    for route in _routes(app):
        if not hasattr(route, "dependant"):
            continue
        touched = False
        for dependant in _dependants(route.dependant):
            if dependant.call is original:
                dependant.call = wrapper
                restores.append(functools.partial(setattr, dependant, "call", original))
                touched = True
        old_list = list(route.dependencies)
        new_list = [_swap_depends(d, original, wrapper) for d in old_list]
        if new_list != old_list:
            route.dependencies[:] = new_list
            restores.append(functools.partial(route.dependencies.__setitem__, slice(None), old_list))
            touched = True
        endpoint = getattr(route.endpoint, "__func__", route.endpoint)
        for attribute in ("__defaults__", "__kwdefaults__"):
            old = getattr(endpoint, attribute, None)
            if not old:
                continue
            new = (
                {k: _swap_depends(v, original, wrapper) for k, v in old.items()}
                if isinstance(old, dict)
                else tuple(_swap_depends(v, original, wrapper) for v in old)
            )
            if new != old:
                setattr(endpoint, attribute, new)
                restores.append(functools.partial(setattr, endpoint, attribute, old))
                touched = True
        routes += touched
    return routes, restores


def _perfkit_over_middlewares(app: Any, **settings: Any) -> _middleware.PerfkitMiddleware:
    """PerfkitMiddleware, added after (so around) LiteLLM's middlewares; what
    it wraps (those middlewares, the framework's exception handling, then the
    router) is the stage ``middlewares``, so their own time is named."""

    async def middlewares(scope: Scope, receive: Receive, send: Send) -> None:
        if read_timeline() is None:  # lifespan, websockets, requests not recorded
            await app(scope, receive, send)
            return
        with Stage(MIDDLEWARES):
            await app(scope, receive, send)

    return PerfkitMiddleware(middlewares, **settings)


class _Instrumentation:
    """What instrument() applied, and what waits: points whose module is not
    loaded yet, and routes added later (a lazily loaded feature)."""

    def __init__(self, app: Any, report: InstrumentReport) -> None:
        self.app, self.report = app, report
        self.restores: list[Restore] = []
        self.dependencies: list[tuple[Point, Any, Any]] = []  # (point, original, its one wrapper)

    def apply(self, point: Point) -> None:
        report = self.report
        try:
            if point.when == "loaded" and point.module not in sys.modules:
                on_import(point.module, lambda module: self.apply(point))
                return
            if point.kind == "dependency":
                original = getattr(importlib.import_module(point.module), point.attribute)
                wrapper = make_wrapper(point, original)
                count, undo = _wrap_dependency(self.app, original, wrapper)
                self.dependencies.append((point, original, wrapper))
                self.restores += undo
                if count:
                    report.instrumented.append(f"{point.stage}: {point.target} ({count} routes)")
                else:
                    report.missing.append(f"{point.target} (no route depends on it)")
                return
            result = apply_point(point, self.routes_added if point.kind == "routes_added" else None)
        except Exception as exc:  # never let a table entry break the proxy
            report.missing.append(f"{point.target} ({type(exc).__name__}: {exc})")
            return
        if isinstance(result, str):
            report.missing.append(result)
        else:
            self.restores.append(result[1])
            report.instrumented.append(f"{point.stage}: {point.target}")

    def routes_added(self) -> None:
        """After a feature added its routes: wrap their auth (the points of its
        module were applied when it was imported, ``on_import``)."""
        for _, original, wrapper in self.dependencies:
            self.restores += _wrap_dependency(self.app, original, wrapper)[1]


def instrument(
    app: Any = None, *, server_timing: HeaderMode = "trusted", overhead_header: HeaderMode = "trusted"
) -> InstrumentReport:
    """Instrument the LiteLLM proxy (``litellm.proxy.proxy_server.app`` by default).

    Call it before the app serves its first request (``perfkit run`` does, in
    every worker). Points the installed version lacks are skipped and named
    in one warning; the proxy serves as before.
    """
    if "report" in _state:
        return _state["report"]  # type: ignore[no-any-return]
    version = importlib.metadata.version("litellm")
    table, points = table_for(version)
    if app is None:
        from litellm.proxy import proxy_server

        app = proxy_server.app
    report = InstrumentReport(version=version, table=table)
    applied = _Instrumentation(app, report)
    left_out = leave_out()
    for point in (*points, *extra_points()):
        if "points" not in left_out and f"point:{point.stage}" not in left_out:
            applied.apply(point)
    if "middleware" not in left_out:
        app.add_middleware(
            _perfkit_over_middlewares,
            server_timing=server_timing,
            overhead_header=overhead_header,
            upstream_stages=UPSTREAM_STAGES,
            attributes=FastPaths(version, table).attributes,
        )
    if report.missing:
        logger.warning(
            "perfkit: LiteLLM %s (table %s): %d instrumentation point(s) not found, their stages are not measured: %s",
            version,
            table,
            len(report.missing),
            "; ".join(report.missing),
        )
    _state.update(report=report, app=app, applied=applied)
    return report


def uninstrument() -> None:
    """Undo instrument(): restore every wrapped function and remove the middleware."""
    if "report" not in _state:
        return
    for restore in reversed(_state["applied"].restores):
        restore()
    app = _state["app"]
    app.user_middleware = [m for m in app.user_middleware if getattr(m, "cls", None) is not _perfkit_over_middlewares]
    app.middleware_stack = None
    _state.clear()
