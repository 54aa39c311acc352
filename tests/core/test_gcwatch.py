from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest

from litellm_perfkit._core._gcwatch import WATCH, GcWatch, install
from tests.support.no_collections import no_collections


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def test_pauses_add_up_and_a_stop_without_a_start_is_ignored() -> None:
    clock = FakeClock()
    watch = GcWatch(clock)
    watch("stop", {"generation": 0})  # installed mid-collection: no start seen
    for pause in (250, 40_000):
        watch("start", {"generation": 2})
        clock.now += pause
        watch("stop", {"generation": 2})
        clock.now += 1_000_000  # time between collections is not a pause
    assert (watch.total_ns, watch.collections) == (40_250, 2)


@pytest.fixture
def automatic_gc_off() -> Iterator[None]:
    with no_collections():
        yield


def test_install_once_and_a_real_collection_is_timed(automatic_gc_off: None) -> None:
    install()
    install()
    assert gc.callbacks.count(WATCH) == 1
    garbage = [[] for _ in range(100_000)]
    for a, b in zip(garbage, garbage[1:]):
        a.append(b)
        b.append(a)
    del garbage, a, b
    before_total, before_count = WATCH.total_ns, WATCH.collections
    started = time.perf_counter_ns()
    assert gc.collect() >= 100_000
    took = time.perf_counter_ns() - started
    assert WATCH.collections == before_count + 1
    # The pause is inside the call, and is most of it (the callbacks are cheap).
    assert 0.8 * took <= WATCH.total_ns - before_total <= took
