"""Which requests are recorded: the ratio, the rate (on a fake clock), and their settings."""

from __future__ import annotations

import pytest

from litellm_perfkit._core import _guard, _sampling
from litellm_perfkit._core._sampling import UNRECORDED, RecordChoice, record_rate_from_env


class FakeClock:
    def __init__(self) -> None:
        self.now_ns = 1_000_000_000

    def __call__(self) -> int:
        return self.now_ns


def recorded_over(choice: RecordChoice, clock: FakeClock, seconds: float, per_second: int) -> int:
    """Requests recorded when ``per_second`` arrive evenly for ``seconds``."""
    recorded = 0
    step = int(1e9 / per_second)
    for _ in range(int(seconds * per_second)):
        recorded += choice.record()
        clock.now_ns += step
    return recorded


def test_the_rate_allows_one_seconds_worth_at_once_then_an_even_pace() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock)
    assert [choice.record() for _ in range(12)] == [True] * 10 + [False] * 2
    clock.now_ns += 100_000_000  # a tenth of a second: one more
    assert [choice.record() for _ in range(3)] == [True, False, False]
    # Saturated for 20 s at 500 a second: ten a second, not more.
    assert recorded_over(choice, clock, 20.0, 500) in range(199, 202)


def test_below_the_rate_every_request_is_recorded_and_idle_time_refills_only_one_second() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock)
    assert recorded_over(choice, clock, 30.0, 8) == 240
    clock.now_ns += 3600 * 10**9  # an idle hour buys no more than ten at once
    assert sum(choice.record() for _ in range(50)) == 10


def test_a_rate_below_one_a_second_records_one_at_a_time() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 0.5, clock)
    assert [choice.record() for _ in range(3)] == [True, False, False]
    clock.now_ns += 2 * 10**9
    assert choice.record()


def test_the_ratio_draws_first_and_the_unrecorded_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = iter([0.1, 0.9, 0.2, 0.3])
    monkeypatch.setattr(_sampling, "draw", lambda: next(draws))
    clock = FakeClock()
    choice = RecordChoice(0.5, 1.0, clock)
    before = UNRECORDED.count
    # Drawn in, drawn out, drawn in but over the rate; never drawn at all for "all".
    assert [choice.record(), choice.record(), choice.record()] == [True, False, False]
    assert UNRECORDED.count - before == 2
    assert not choice.every_request and RecordChoice(1.0, "all").every_request


def test_the_rate_from_the_environment(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("PERFKIT_RECORD_RATE")
    assert record_rate_from_env() == 10.0  # the default
    for raw, rate in (("all", "all"), (" ALL ", "all"), ("2.5", 2.5)):
        monkeypatch.setenv("PERFKIT_RECORD_RATE", raw)
        assert record_rate_from_env() == rate
    monkeypatch.setattr(_guard, "_warned", set())
    for bad in ("0", "-1", "inf", "fast"):
        monkeypatch.setenv("PERFKIT_RECORD_RATE", bad)
        assert record_rate_from_env() == 10.0
    assert "PERFKIT_RECORD_RATE='0' is neither 'all' nor a positive number" in caplog.text
