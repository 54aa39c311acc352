"""litellm_perfkit: where an LLM gateway's milliseconds go, request by request.

    import litellm_perfkit
    app = litellm_perfkit.PerfkitMiddleware(app)
    litellm_perfkit.configure()          # export per OTEL_* variables

    with litellm_perfkit.stage("auth"):
        ...

Names load on first use: ``import litellm_perfkit.mock`` (or the load driver,
or the Locust user) loads neither the recorder nor the exporters, and adds no
garbage-collector callback to the process it runs in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from ._core import OVERHEAD_HEADER, PerfkitMiddleware, current_timeline, stage
    from ._export import configure, serve_prometheus, shutdown

__all__ = [
    "OVERHEAD_HEADER",
    "PerfkitMiddleware",
    "__version__",
    "configure",
    "current_timeline",
    "instrument",
    "serve_prometheus",
    "shutdown",
    "stage",
    "uninstrument",
]

_WHERE = {
    "OVERHEAD_HEADER": "._core",
    "PerfkitMiddleware": "._core",
    "current_timeline": "._core",
    "stage": "._core",
    "configure": "._export",
    "serve_prometheus": "._export",
    "shutdown": "._export",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'litellm_perfkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def instrument(app: object = None, **options: object) -> object:
    """Instrument the LiteLLM proxy; see docs/litellm.md. Imports LiteLLM."""
    from ._litellm import instrument as _instrument

    return _instrument(app, **options)  # type: ignore[arg-type]


def uninstrument() -> None:
    """Undo instrument()."""
    from ._litellm import uninstrument as _uninstrument

    _uninstrument()
