"""litellm_perfkit: where an LLM gateway's milliseconds go, request by request.

    import litellm_perfkit
    app = litellm_perfkit.PerfkitMiddleware(app)
    litellm_perfkit.configure()          # export per OTEL_* variables

    with litellm_perfkit.stage("auth"):
        ...
"""

from __future__ import annotations

from ._core import OVERHEAD_HEADER, PerfkitMiddleware, current_timeline, stage
from ._export import configure, shutdown
from ._version import __version__


def instrument(app: object = None, **options: object) -> object:
    """Instrument the LiteLLM proxy; see docs/litellm.md. Imports LiteLLM."""
    from ._litellm import instrument as _instrument

    return _instrument(app, **options)  # type: ignore[arg-type]


def uninstrument() -> None:
    """Undo instrument()."""
    from ._litellm import uninstrument as _uninstrument

    _uninstrument()


__all__ = [
    "OVERHEAD_HEADER",
    "PerfkitMiddleware",
    "__version__",
    "configure",
    "current_timeline",
    "instrument",
    "shutdown",
    "stage",
    "uninstrument",
]
