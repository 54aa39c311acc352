"""Fake readings for perfkit bisect's search: what one pair of proxies would measure."""

from __future__ import annotations

from typing import Any

from litellm_perfkit._bench._pairs import SideReading


def side_reading(cpu_ms: float, *, served: int, stages: dict[str, float], fast_paths: dict[str, Any]) -> SideReading:
    """One side of a pair: ``cpu_ms`` of CPU a request (so 1000 / ``cpu_ms`` a second), over 400 requests measured."""
    return {
        "cpu_ms": cpu_ms,
        "rps": 1000 / cpu_ms,
        "requests": 400,
        "served": served,
        "stages": stages,
        "fast_paths": fast_paths,
    }
