"""Which requests are recorded and what each stands for: the ratio, the rate and
the weights (on a fake clock), sampled traceparents, and their settings."""

from __future__ import annotations

import random

import pytest

from litellm_perfkit._core import _guard, _sampling
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._sampling import (
    UNRECORDED,
    HeadersFound,
    Pace,
    RecordChoice,
    effective_size,
    rank_standard_error,
    record_rate_from_env,
    sampled_parent,
    traced_rate_from_env,
    weighted_quantile,
)
from tests.support import backends
from tests.support.clock import FakeClock


def recorded_over(choice: RecordChoice, clock: FakeClock, seconds: float, per_second: int) -> int:
    """Requests recorded when ``per_second`` arrive evenly for ``seconds``."""
    recorded = 0
    step = int(1e9 / per_second)
    for _ in range(int(seconds * per_second)):
        recorded += choice.record() > 0
        clock.now += step
    return recorded


def test_the_rate_allows_one_seconds_worth_at_once_then_an_even_pace() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock)
    assert [choice.record() for _ in range(12)] == [1] * 10 + [0] * 2
    clock.advance_ms(100)  # a tenth of a second: one more, standing for the two passed by and itself
    assert [choice.record() for _ in range(3)] == [3, 0, 0]
    # Saturated for 20 s at 500 a second: ten a second, not more.
    assert recorded_over(choice, clock, 20.0, 500) in range(199, 202)


def test_below_the_rate_every_request_is_recorded_and_idle_time_refills_only_one_second() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock)
    assert recorded_over(choice, clock, 30.0, 8) == 240
    clock.now += 3600 * 10**9  # an idle hour buys no more than ten at once
    assert sum(choice.record() > 0 for _ in range(50)) == 10


def test_a_rate_below_one_a_second_records_one_at_a_time() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 0.5, clock)
    assert [choice.record() for _ in range(3)] == [1, 0, 0]
    clock.now += 2 * 10**9
    assert choice.record() == 3


def test_the_ratio_draws_first_and_the_unrecorded_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = iter([0.1, 0.9, 0.2, 0.3, 0.4])
    monkeypatch.setattr(_sampling, "draw", lambda: next(draws))
    clock = FakeClock()
    choice = RecordChoice(0.5, 1.0, clock)
    before = UNRECORDED.count
    # Drawn in, drawn out, drawn in but over the rate; a second later drawn in:
    # it stands for the two passed by, whichever of the two passed them by.
    assert [choice.record(), choice.record(), choice.record()] == [1, 0, 0]
    clock.now += 10**9
    assert choice.record() == 3
    assert UNRECORDED.count - before == 2
    assert not choice.every_request and RecordChoice(1.0, "all").every_request


def test_a_pace_alone_takes_one_seconds_worth_then_its_rate() -> None:
    clock = FakeClock()
    pace = Pace(4.0, clock)
    assert [pace.allows() for _ in range(5)] == [True] * 4 + [False]
    clock.advance_ms(250)
    assert [pace.allows(), pace.allows()] == [True, False]


# -- the weighted sample ----------------------------------------------------------

Arrival = tuple[int, float]  # (arrival ns, the request's latency ms)


def bursty(seconds: int, rng: random.Random) -> list[Arrival]:
    """Cycles of a quiet 5 s (5 requests a second, 4-6 ms each) and a 1 s burst
    (400 a second, 40-60 ms each, as a saturated proxy queues), Poisson arrivals."""
    arrivals: list[Arrival] = []
    now = 0.0
    while now < seconds:
        busy = now % 6 >= 5
        now += rng.expovariate(400.0 if busy else 5.0)
        arrivals.append((int(now * 1e9), rng.uniform(40, 60) if busy else rng.uniform(4, 6)))
    return arrivals


def sampled(arrivals: list[Arrival], choice: RecordChoice, clock: FakeClock) -> list[tuple[float, int]]:
    """(latency, weight) of each request the choice records."""
    sample = []
    for at_ns, latency in arrivals:
        clock.now = 10**9 + at_ns
        weight = choice.record()
        if weight:
            sample.append((latency, weight))
    return sample


def share_at_most(arrivals: list[Arrival], value: float) -> float:
    return sum(latency <= value for _, latency in arrivals) / len(arrivals)


def test_bursts_bias_the_paced_samples_percentiles_and_the_weights_remove_it() -> None:
    arrivals = bursty(120, random.Random(31))
    clock = FakeClock()
    sample = sampled(arrivals, RecordChoice(1.0, 10.0, clock), clock)
    unweighted = [(latency, 1) for latency, _ in sample]
    # 94% of the requests come in bursts and take 40-60 ms; the pace records
    # every quiet request but only ~20 of each burst's 400.
    assert share_at_most(arrivals, 6.0) < 0.07
    assert len(sample) < len(arrivals) / 8
    assert weighted_quantile(unweighted, 0.5) < 6.0  # the paced sample's median is a quiet request's
    n = effective_size(sample)
    for q in (0.5, 0.9, 0.95):
        estimate = weighted_quantile(sample, q)
        bound = 3 * rank_standard_error(q, n)
        assert abs(share_at_most(arrivals, estimate) - q) <= bound, (q, estimate, n)
    assert 40 <= weighted_quantile(sample, 0.5) <= 60


def test_the_weights_add_up_to_every_request_but_those_after_the_last_recorded() -> None:
    rng = random.Random(7)
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock)
    arrivals = bursty(60, rng)
    sample = sampled(arrivals, choice, clock)
    passed_after_last = choice._passed
    assert sum(w for _, w in sample) + passed_after_last == len(arrivals)
    # What the last one recorded leaves out: at most a gap of the pace (a tenth of a second of a burst).
    assert passed_after_last <= 400 * 0.1 * 2


def test_with_a_ratio_too_the_weights_count_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    monkeypatch.setattr(_sampling, "draw", rng.random)
    clock = FakeClock()
    choice = RecordChoice(0.3, 10.0, clock)
    arrivals = bursty(60, rng)
    sample = sampled(arrivals, choice, clock)
    assert sum(w for _, w in sample) + choice._passed == len(arrivals)
    assert 40 <= weighted_quantile(sample, 0.5) <= 60


def test_under_the_rate_every_weight_is_one() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock)
    arrivals = [(n * 200_000_000, 5.0) for n in range(100)]  # 5 a second
    assert [w for _, w in sampled(arrivals, choice, clock)] == [1] * 100


# -- sampled parents ----------------------------------------------------------------

TRACE = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-"


@pytest.mark.parametrize(
    ("value", "sampled"),
    [
        (TRACE + b"01", True),
        (TRACE + b"03", True),  # other flags beside sampled
        (TRACE + b"00", False),
        (TRACE + b"02", False),
        (TRACE + b"0B", True),  # upper case, as perfkit's parser reads it
        (b"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later", True),  # a later version appends
        (b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x", False),  # version 00 is exactly 55
        (b"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", False),
        (b"00-00000000000000000000000000000000-b7ad6b7169203331-01", False),  # an invalid trace id
        (b"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", False),
        (b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1", False),  # too short
        (b"", False),
        (b"nonsense that is long enough to reach position fifty-five: 1", False),
    ],
)
def test_a_sampled_parent_is_a_valid_traceparent_with_the_sampled_flag(value: bytes, sampled: bool) -> None:
    assert sampled_parent(value) is sampled


@pytest.mark.parametrize(
    ("headers", "found"),
    [
        ([], 0),
        ([(b"host", b"x"), (b"accept", b"*/*")], 0),
        ([(b"x-perfkit-secret", b"anything")], HeadersFound.SECRET),
        ([(b"traceparent", TRACE + b"01"), (b"host", b"x")], HeadersFound.SAMPLED),
        ([(b"traceparent", TRACE + b"00")], 0),  # not sampled: nothing to read further
        ([(b"traceparent", b"00-short-01")], 0),
        ([(b"X-Perfkit-Secret", b"s")], 0),  # ASGI names are lower case
        ([(b"traceparent", TRACE + b"0f"), (b"x-perfkit-secret", b"s")], HeadersFound.SECRET | HeadersFound.SAMPLED),
    ],
)
def test_the_header_scan_finds_the_secret_and_what_may_be_a_sampled_parent(
    backend: Backend, headers: list[tuple[bytes, bytes]], found: int
) -> None:
    assert backend.middleware._scan_headers(headers) == found
    assert backend.middleware._scan_headers(tuple(headers)) == found


def test_the_c_scan_leaves_headers_it_cannot_read_to_the_full_pass() -> None:
    speedups = backends.load("c").speedups
    assert speedups is not None
    assert speedups.scan_headers([[b"x-perfkit-secret", b"s"]]) & HeadersFound.UNREAD  # a list, not a tuple
    assert speedups.scan_headers([("x-perfkit-secret", b"s")]) & HeadersFound.UNREAD
    assert speedups.scan_headers([(b"traceparent", "00-...")]) & HeadersFound.UNREAD
    with pytest.raises(TypeError):
        speedups.scan_headers(None)


# -- settings ---------------------------------------------------------------------


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


def test_the_traced_rate_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("PERFKIT_RECORD_TRACED_RATE", raising=False)
    assert traced_rate_from_env() == "all"  # the default: every sampled parent
    monkeypatch.setenv("PERFKIT_RECORD_TRACED_RATE", "50")
    assert traced_rate_from_env() == 50.0
    monkeypatch.setattr(_guard, "_warned", set())
    monkeypatch.setenv("PERFKIT_RECORD_TRACED_RATE", "lots")
    assert traced_rate_from_env() == "all"
    assert "PERFKIT_RECORD_TRACED_RATE='lots' is neither 'all' nor a positive number" in caplog.text


def test_weighted_quantile_counts_each_value_as_its_weight() -> None:
    sample = [(3.0, 1), (1.0, 3), (2.0, 1)]  # as if 1.0 had been seen three times: 1 1 1 2 3
    assert [weighted_quantile(sample, q) for q in (0.2, 0.6, 0.61, 0.8, 0.81, 1.0)] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
