"""A fake perf_counter_ns for timing logic: time moves only when a test says so."""

from __future__ import annotations

import pytest

from litellm_perfkit._core import _middleware, _stage, _timeline


class FakeClock:
    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += int(ms * 1_000_000)


def install(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    clock = FakeClock()
    for module in (_timeline, _stage, _middleware):
        monkeypatch.setattr(module, "perf_counter_ns", clock)
    return clock
