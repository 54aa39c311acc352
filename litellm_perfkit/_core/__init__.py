"""The recorder and middleware core: everything that runs on the request path.

The classes here are the running backend's (``_backend``: C or Python).
"""

from __future__ import annotations

from .._wire._names import OVERHEAD_HEADER
from ._backend import ACTIVE
from ._stage import open_stage
from ._timeline import Timeline, current_timeline

PerfkitMiddleware = ACTIVE.middleware
Stage = ACTIVE.stage
# ``stage("auth")`` is the class itself: a function returning ``Stage(name)``
# would add a call to every stage, in a request or not.
stage = Stage

__all__ = ["OVERHEAD_HEADER", "PerfkitMiddleware", "Stage", "Timeline", "current_timeline", "open_stage", "stage"]
