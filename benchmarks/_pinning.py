"""Core pinning for the benchmarks (Linux)."""

from __future__ import annotations

import contextlib
import os

__all__ = ["pin"]


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of ``pid`` onto ``cores``; threads it starts later inherit it."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task), cores)
