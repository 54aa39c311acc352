from __future__ import annotations

import random

from litellm_perfkit._load._hdr import Histogram


def test_percentiles_within_a_tenth_of_a_percent() -> None:
    rng = random.Random(1)
    values = sorted(rng.randrange(1, 10**10) for _ in range(20000))
    histogram = Histogram()
    for v in values:
        histogram.record(v)
    for p in (50, 90, 99, 99.9):
        exact = values[int(len(values) * p / 100) - 1]
        assert abs(histogram.percentile(p) - exact) <= exact / 1024 + 1
    assert histogram.percentile(100) == values[-1] and histogram.minimum == values[0]


def test_merge_is_exact() -> None:
    rng = random.Random(2)
    parts = [Histogram() for _ in range(4)]
    whole = Histogram()
    for i in range(10000):
        v = rng.randrange(1, 10**9)
        parts[i % 4].record(v)
        whole.record(v)
    merged = Histogram()
    for part in parts:
        merged.merge(Histogram.from_dict(part.to_dict()))
    assert merged.counts == whole.counts
    assert (merged.count, merged.total, merged.minimum, merged.maximum) == (
        whole.count,
        whole.total,
        whole.minimum,
        whole.maximum,
    )


def test_small_values_are_exact() -> None:
    histogram = Histogram()
    for v in (0, 1, 5, 2047):
        histogram.record(v)
    assert [histogram.percentile(p) for p in (25, 50, 75, 100)] == [0, 1, 5, 2047]
