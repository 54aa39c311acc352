"""Zero-code loading: instrument ``litellm.proxy.proxy_server`` the moment it is imported.

A post-import hook on ``sys.meta_path``: when the module has finished
executing (its app and routes exist, no request served yet), perfkit starts
exporting and instruments it. The same hook applies the points of modules
LiteLLM loads later (``on_import``). It runs in every process that imports the
proxy, so in every uvicorn worker, which are spawned and so never inherit
patches from their parent.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast, get_args

from .._core._leave_out import leave_out
from .._wire._environment_variables import PERFKIT_OVERHEAD_HEADER, PERFKIT_SERVER_TIMING
from ..types import HeaderMode

TARGET = "litellm.proxy.proxy_server"

__all__ = ["install", "on_import", "TARGET"]


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Calls a module's callbacks once it has finished executing (``on_import``)."""

    def __init__(self) -> None:
        self._busy = False
        self.callbacks: dict[str, list[Callable[[ModuleType], None]]] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.callbacks or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            for callback in self.callbacks.pop(fullname, []):
                try:
                    callback(module)
                except Exception as exc:  # perfkit's bug must never break the host's import
                    from .._core._guard import internal_error

                    internal_error("litellm.on_import", exc)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _on_import(module: ModuleType) -> None:
    from .._core._guard import logger

    try:
        import litellm_perfkit

        from . import instrument

        litellm_perfkit.configure()
        instrument(
            module.app,
            server_timing=_header_mode(PERFKIT_SERVER_TIMING),
            overhead_header=_header_mode(PERFKIT_OVERHEAD_HEADER),
        )
        from .._core._lifespan import OnShutdown
        from .._profile._setup import from_environment

        left_out = leave_out()
        if "profiles" not in left_out:
            from_environment(module.app)
        if "shutdown" not in left_out:
            # Flush the last spans when the worker shuts down: atexit never
            # runs after uvicorn re-raises SIGTERM.
            module.app.add_middleware(OnShutdown, callback=litellm_perfkit.shutdown)
    except Exception as exc:  # never stop the proxy from starting
        logger.warning(
            "perfkit: could not instrument the LiteLLM proxy (%s: %s); it runs uninstrumented", type(exc).__name__, exc
        )


def _header_mode(variable: str) -> HeaderMode:
    value = os.environ.get(variable, "trusted").strip().lower()
    for mode in get_args(HeaderMode):
        if value == mode:
            return cast(HeaderMode, mode)
    from .._core._guard import warn_once

    warn_once(variable, "perfkit: %s=%r is not trusted, on or off; using 'trusted'", variable, value)
    return "trusted"


def on_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once module ``name`` has been imported: now
    if it has been, else when its code has run (before ``from name import
    x`` reads it)."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    finder = next((f for f in sys.meta_path if isinstance(f, _PostImportFinder)), None)
    if finder is None:
        finder = _PostImportFinder()
        sys.meta_path.insert(0, finder)
    finder.callbacks.setdefault(name, []).append(callback)


def install() -> None:
    on_import(TARGET, _on_import)
