"""A fake perf_counter_ns for timing logic: time moves only when a test says so."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from litellm_perfkit._core import (
    _after,
    _backend,
    _middleware,
    _protocol,
    _stage,
    _steps,
    _threads,
    _timeline,
    _traffic,
)

_MODULES = (_timeline, _stage, _middleware, _steps, _after, _threads, _protocol, _traffic)


class FakeClock:
    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += int(ms * 1_000_000)


@contextmanager
def installed(clock: FakeClock | None = None) -> Iterator[FakeClock]:
    """The fake clock in the Python modules and in the C accelerator, then the real one again."""
    clock = clock or FakeClock()
    saved = [(module, module.perf_counter_ns) for module in _MODULES]
    for module, _ in saved:
        module.perf_counter_ns = clock  # type: ignore[attr-defined]
    speedups = _backend._speedups  # the C module, when a test has loaded it
    previous = speedups.set_clock(clock) if speedups is not None else None
    try:
        yield clock
    finally:
        for module, original in saved:
            module.perf_counter_ns = original  # type: ignore[attr-defined]
        if speedups is not None:
            speedups.set_clock(previous)
