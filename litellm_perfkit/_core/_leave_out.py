"""``PERFKIT_LEAVE_OUT``: parts of ``perfkit run`` left out, to measure what each costs.

A comma-separated list of ``PARTS`` and ``point:<stage>`` (that stage's
wrapped functions). benchmarks/litellm_overhead.py ablates with it
(docs/overhead.md); what is left out is not measured, and a request's
figures then miss it.
"""

from __future__ import annotations

import os
from typing import Literal, get_args

from .._wire._environment_variables import PERFKIT_LEAVE_OUT
from ._guard import warn_once

__all__ = ["Part", "leave_out"]

Part = Literal["points", "middleware", "gcwatch", "shutdown", "profiles"]
"""``points``: every wrapped LiteLLM function; ``middleware``: the request
middleware (no timeline, so stages record nothing); ``gcwatch``: the
collector-pause watch; ``shutdown``: the middleware that flushes at worker
shutdown; ``profiles``: the per-request profile and stage-profile middlewares."""


def leave_out(text: str | None = None) -> frozenset[str]:
    text = os.environ.get(PERFKIT_LEAVE_OUT, "") if text is None else text
    parts = frozenset(p.strip() for p in text.split(",") if p.strip())
    unknown = sorted(p for p in parts if p not in get_args(Part) and not p.startswith("point:"))
    if unknown:
        warn_once(
            "leave_out",
            "perfkit: PERFKIT_LEAVE_OUT names unknown parts %s (use %s or point:<stage>)",
            ", ".join(unknown),
            ", ".join(get_args(Part)),
        )
    return parts
