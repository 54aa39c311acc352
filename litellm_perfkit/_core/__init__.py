"""The recorder and middleware core: everything that runs on the request path."""

from __future__ import annotations

from ._middleware import OVERHEAD_HEADER, PerfkitMiddleware
from ._stage import Stage, stage
from ._timeline import Timeline, current_timeline

__all__ = ["OVERHEAD_HEADER", "PerfkitMiddleware", "Stage", "Timeline", "current_timeline", "stage"]
