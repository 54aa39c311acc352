"""A log-linear (HDR-style) histogram of integer nanoseconds.

Values keep 11 significant bits (relative error below 1/1024, about 0.1%),
far finer than Locust's two significant digits. Counts live in a sparse dict,
so histograms from many driver processes merge exactly by adding counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from ..types import HistogramData, Percentiles

__all__ = ["Histogram"]

_SUB_BITS = 11  # 2048 sub-buckets per power of two


def _index(value: int) -> int:
    shift = max(0, value.bit_length() - _SUB_BITS)
    return (shift << _SUB_BITS) | (value >> shift)


def _value(index: int) -> int:
    """The highest value that maps to ``index`` (HDR reports this one)."""
    shift = index >> _SUB_BITS
    sub = index & ((1 << _SUB_BITS) - 1)
    return ((sub + 1) << shift) - 1 if shift else sub


class Histogram:
    __slots__ = ("counts", "count", "total", "minimum", "maximum")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.total = 0
        self.minimum = 0
        self.maximum = 0

    def record(self, value_ns: int) -> None:
        value = value_ns if value_ns > 0 else 0
        index = _index(value)
        counts = self.counts
        counts[index] = counts.get(index, 0) + 1
        if self.count == 0 or value < self.minimum:
            self.minimum = value
        if value > self.maximum:
            self.maximum = value
        self.count += 1
        self.total += value

    def merge(self, other: Histogram) -> None:
        for index, n in other.counts.items():
            self.counts[index] = self.counts.get(index, 0) + n
        if other.count:
            self.minimum = other.minimum if self.count == 0 else min(self.minimum, other.minimum)
            self.maximum = max(self.maximum, other.maximum)
        self.count += other.count
        self.total += other.total

    def percentile(self, p: float) -> int:
        """Smallest recorded value (to 0.1%) at or below which ``p`` percent lie."""
        if self.count == 0:
            return 0
        if p >= 100:
            return self.maximum
        rank = max(1, -(-self.count * p // 100))  # ceil
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return min(_value(index), self.maximum)
        return self.maximum

    def summary_ms(self) -> Percentiles:
        def ms(value: int) -> float:
            return round(value / 1e6, 4)

        return {
            "p50": ms(self.percentile(50)),
            "p90": ms(self.percentile(90)),
            "p95": ms(self.percentile(95)),
            "p99": ms(self.percentile(99)),
            "max": ms(self.maximum),
            "min": ms(self.minimum),
            "mean": round(self.total / self.count / 1e6, 4) if self.count else 0.0,
            "count": self.count,
        }

    def to_dict(self) -> HistogramData:
        return {
            "counts": {str(k): v for k, v in self.counts.items()},
            "count": self.count,
            "total": self.total,
            "min": self.minimum,
            "max": self.maximum,
        }

    @classmethod
    def from_dict(cls, data: HistogramData | Mapping[str, object]) -> Histogram:
        histogram = cls()
        counts = cast("Mapping[str | int, int]", data["counts"])
        histogram.counts = {int(k): int(v) for k, v in counts.items()}
        histogram.count = int(cast(int, data["count"]))
        histogram.total = int(cast(int, data["total"]))
        histogram.minimum = int(cast(int, data["min"]))
        histogram.maximum = int(cast(int, data["max"]))
        return histogram
