"""perfkit bench's options for tests: phases seconds long, no progress bars, the log kept in memory."""

from __future__ import annotations

import io
from typing import Any

from litellm_perfkit._bench import BenchOptions


def short_bench(**options: Any) -> BenchOptions:
    """A bench with no idle phase and a 2 s direct phase, quiet; ``options`` set the rest (and may override these)."""
    values: dict[str, Any] = {"direct_duration_s": 2.0, "idle_s": 0.0, "progress": "off", "log": io.StringIO()}
    return BenchOptions(**{**values, **options})
