"""Waiting, in real time, for another process to make a condition true."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(check: Callable[[], bool], timeout_s: float, every_s: float = 0.2) -> float | None:
    """Seconds until ``check()`` held, asked every ``every_s``; None when it still did not after ``timeout_s``."""
    started = time.monotonic()
    while True:
        if check():
            return time.monotonic() - started
        if time.monotonic() >= started + timeout_s:
            return None
        time.sleep(every_s)
