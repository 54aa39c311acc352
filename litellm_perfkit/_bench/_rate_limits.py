"""``--scenario rate-limited-deployments``: did the deployments' rpm limits hold?

LiteLLM's router counts each deployment's requests per UTC minute
(``usage-based-routing-v2``, in Redis when the proxies have one, so every
instance sees the others' requests). The bench groups the measured requests
by the UTC minute the driver sent them in: in each minute the proxies may
answer at most deployments x rpm with 200 together, plus the requests in
flight across the minute's boundary (at most one per user: the driver's
minute and the router's can differ by a request's time to the router).
Warm-up and idle requests count against the limit too and are not in the
driver's records, so a minute may show fewer 200s than the limit allows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ..types import BenchMinute, BenchRateLimits

__all__ = ["Send", "rate_limits"]

Send = tuple[float, int | None]
"""A measured request: its send time (unix seconds) and its status (None: no answer)."""


def _minute(unix_s: float) -> str:
    return time.strftime("%H:%M", time.gmtime(unix_s))


def rate_limits(sends: Iterable[Send], deployments: int, rpm: int, users: int) -> BenchRateLimits:
    minutes: dict[str, BenchMinute] = {}
    for sent, status in sorted(sends):
        row = minutes.setdefault(_minute(sent), {"minute": _minute(sent), "ok": 0, "rate_limited": 0})
        if status == 200:
            row["ok"] += 1
        elif status == 429:
            row["rate_limited"] += 1
    allowed = deployments * rpm + users
    return {
        "deployments": deployments,
        "rpm_per_deployment": rpm,
        "minutes": list(minutes.values()),
        "held": all(row["ok"] <= allowed for row in minutes.values()),
    }
