"""Recording a share of requests: ``PERFKIT_RECORD_RATIO``.

OpenTelemetry's samplers (``OTEL_TRACES_SAMPLER``) choose which recorded
requests become spans, after the fact: every request is still recorded and
counted in the metrics. This ratio chooses which requests are recorded at
all, when each starts: the rest pass through the middleware untouched (no
timeline, no stages, no step accounting, nothing exported), so perfkit's
cost per request falls in proportion (docs/overhead.md). The draw is random
per request, not tied to a trace id.
"""

from __future__ import annotations

import os
import random

from ._guard import warn_once

__all__ = ["draw", "record_ratio_from_env"]

draw = random.Random().random


def record_ratio_from_env() -> float:
    """``PERFKIT_RECORD_RATIO``: a number from 0 to 1 (default 1); anything else warns and means 1."""
    raw = os.environ.get("PERFKIT_RECORD_RATIO", "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        warn_once("record_ratio", "perfkit: PERFKIT_RECORD_RATIO=%r is not a number from 0 to 1; recording every request", raw)
        return 1.0
    return value
