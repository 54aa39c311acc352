"""Which requests are recorded and what each stands for: the ratio, the rate and
the weights (on a fake clock), sampled traceparents, and their settings."""

from __future__ import annotations

import random

import pytest

from litellm_perfkit._core import _guard
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


def test_the_cap_allows_two_seconds_worth_at_once_then_aims_the_draw_at_the_rate() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock, random.Random(5).random)
    assert [choice.record() for _ in range(25)] == [1] * 20 + [0] * 5
    # Saturated for 20 s at 500 a second: each request drawn at 10 in 500, about
    # ten a second (a binomial count), and never past the pace's ceiling.
    recorded_at = []
    for n in range(20 * 500):
        clock.now = 10**9 + n * 2_000_000
        if choice.record():
            recorded_at.append(clock.now)
    # The load's first second draws at the chance the 25 of the second before gave (0.4) and the
    # pace holds it to about ten; each second after at 10 in 500.
    expected = 19 * 10
    assert abs(len(recorded_at) - expected) <= 3.3 * expected**0.5, len(recorded_at)
    for i, at in enumerate(recorded_at):  # at most 10 a second and 20 at once, over any stretch
        assert sum(1 for later in recorded_at[i:] if later - at < 3 * 10**9) <= 10 * 3 + 20


def test_below_the_rate_every_request_is_recorded_and_idle_time_refills_two_seconds() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock)
    assert recorded_over(choice, clock, 30.0, 8) == 240
    clock.now += 3600 * 10**9  # an idle hour buys no more than twenty at once
    assert sum(choice.record() > 0 for _ in range(50)) == 20


def test_a_rate_below_one_a_second_records_one_at_a_time() -> None:
    clock = FakeClock()
    choice = RecordChoice(1.0, 0.5, clock, lambda: 0.0)  # every draw in: the pace alone decides
    assert [choice.record() for _ in range(3)] == [1, 0, 0]
    clock.now += 2 * 10**9
    assert choice.record() == 3


def test_the_chance_is_the_ratio_or_the_rate_over_the_last_windows_arrivals() -> None:
    draws = iter([0.1, 0.9, 0.2, 0.3, 0.6, 0.1, 0.2])
    clock = FakeClock()
    choice = RecordChoice(0.5, 1.0, clock, lambda: next(draws))
    before = UNRECORDED.count
    # Drawn in at the ratio, drawn out, drawn in (standing for itself and the one
    # passed by), drawn in but past the pace's two at once.
    assert [choice.record() for _ in range(4)] == [1, 0, 2, 0]
    # A second later: three the ratio let through came in the second before, so the
    # rate's chance is 1 in 3: drawn out by the ratio, then drawn in by both.
    clock.now += 10**9
    assert [choice.record(), choice.record()] == [0, 3]
    assert UNRECORDED.count - before == 3
    assert not choice.every_request and RecordChoice(1.0, "all").every_request


def test_a_steady_offset_between_two_kinds_of_request_leaves_neither_out() -> None:
    """Two drivers at a steady rate (7 and 1 a second, one offset from the other), as a load
    test sends: each recorded kind's weights add up to its share of the requests. A pace that
    took the first request after each due time kept the same offsets and never the second kind."""
    shares = []
    for seed in range(20):
        rng = random.Random(seed)
        offset = rng.random()
        arrivals = sorted([(n / 7, "often") for n in range(350)] + [(offset + n, "seldom") for n in range(50)])
        clock = FakeClock()
        choice = RecordChoice(1.0, 1.5, clock, rng.random)
        weights = {"often": 0, "seldom": 0}
        for at, kind in arrivals:
            clock.now = 10**9 + int(at * 1e9)
            weights[kind] += choice.record()
        shares.append(weights["seldom"] / sum(weights.values()))
    mean = sum(shares) / len(shares)
    # 1 in 8 come seldom; about 70 recorded a run, so a run's share is off by
    # about sqrt(0.11 / 70) = 4 points, and the mean of 20 runs by about 1.
    assert abs(mean - 1 / 8) <= 0.033, shares
    assert min(shares) > 0, shares


def test_a_pace_alone_takes_its_bursts_worth_then_its_rate() -> None:
    clock = FakeClock()
    pace = Pace(4.0, clock)
    assert [pace.allows() for _ in range(5)] == [True] * 4 + [False]
    clock.advance_ms(250)
    assert [pace.allows(), pace.allows()] == [True, False]
    two_seconds = Pace(4.0, clock, burst_s=2.0)
    assert [two_seconds.allows() for _ in range(9)] == [True] * 8 + [False]
    assert not two_seconds.allows(clock.now + 200_000_000) and two_seconds.allows(clock.now + 250_000_000)


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


def test_bursts_bias_the_unweighted_samples_percentiles_and_the_weights_remove_it() -> None:
    arrivals = bursty(120, random.Random(31))
    clock = FakeClock()
    sample = sampled(arrivals, RecordChoice(1.0, 10.0, clock, random.Random(31).random), clock)
    unweighted = [(latency, 1) for latency, _ in sample]
    # 94% of the requests come in bursts and take 40-60 ms; the cap records
    # most quiet requests but only ~20-40 of each burst's 400.
    assert share_at_most(arrivals, 6.0) < 0.07
    assert len(sample) < len(arrivals) / 6
    # The sample's own median sits near the population's 20th percentile: quiet requests are
    # about 40% of the records and 6% of the requests.
    assert share_at_most(arrivals, weighted_quantile(unweighted, 0.5)) < 0.3
    n = effective_size(sample)
    for q in (0.5, 0.9, 0.95):
        estimate = weighted_quantile(sample, q)
        bound = 3 * rank_standard_error(q, n)
        assert abs(share_at_most(arrivals, estimate) - q) <= bound, (q, estimate, n)
    assert 40 <= weighted_quantile(sample, 0.5) <= 60


def test_the_weights_add_up_to_every_request_but_those_after_the_last_recorded() -> None:
    rng = random.Random(7)
    clock = FakeClock()
    choice = RecordChoice(1.0, 10.0, clock, rng.random)
    arrivals = bursty(60, rng)
    sample = sampled(arrivals, choice, clock)
    passed_after_last = choice._passed
    assert sum(w for _, w in sample) + passed_after_last == len(arrivals)
    # What the last one recorded leaves out: the requests after it, a geometric count of mean
    # 1 / chance (past 7 means once in a thousand), and a pace's gap at most where it met the pace.
    assert passed_after_last <= 7 / choice._chance + 400 * 0.1


def test_with_a_ratio_too_the_weights_count_every_request() -> None:
    rng = random.Random(3)
    clock = FakeClock()
    choice = RecordChoice(0.3, 10.0, clock, rng.random)
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
