"""Shared by the tests of the C accelerator (tests/core/test_speedups*.py)."""

from __future__ import annotations

import os
from typing import Any

from tests.support import backends

STAGE_NAMES = ["auth", "upstream", "pre call", "routé", "serialize"]


def speedups() -> Any:
    """The C accelerator's module; the tests that compare it with Python fail without it."""
    return backends.load("c").speedups


class TickClock:
    """Every read moves time on by 1 µs, so two implementations agree only if
    they read the clock at the same points, in the same order."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        self.now += 1_000
        return self.now


def new_handoff(max_records: int, capacity: int, wake: Any) -> Any:
    return speedups().Handoff(max_records, capacity, wake)


def read_frame(fd: int) -> bytes:
    data = b""
    while len(data) < 5 or len(data) < 5 + int.from_bytes(data[1:5], "little"):
        data += os.read(fd, 1 << 16)
    return data
