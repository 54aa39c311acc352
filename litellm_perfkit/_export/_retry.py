"""Retrying an OTLP export the way the OTLP specification asks.

A backend that answers "busy" (HTTP 429, 502, 503, 504; gRPC UNAVAILABLE and
the like) gets the same payload again after a pause: the time its
``Retry-After`` header asks for, else an exponential backoff. Every retry
fits inside the export's timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``); a pause
that would not ends the export, and the pipeline counts what it dropped.
Retries run in the export agent (or thread), never on the request path:
while one waits, new spans queue up to the queue's bound and the rest are
dropped and counted, as with a backend that is down.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["RETRYABLE_HTTP_STATUSES", "Busy", "RetryPolicy", "retry_after_s"]

T = TypeVar("T")

RETRYABLE_HTTP_STATUSES = frozenset({429, 502, 503, 504})
"""What the OTLP/HTTP specification calls retryable; any other failure is final."""


class Busy(RuntimeError):
    """The backend asked to be tried again, perhaps after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def retry_after_s(value: str | None, now_unix_s: float | None = None) -> float | None:
    """A ``Retry-After`` header's pause in seconds (delay-seconds or an HTTP
    date), or None when absent or unreadable (then the backoff decides)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_unix_s is None else now_unix_s
    return max(0.0, when.timestamp() - now)


@dataclass
class RetryPolicy:
    """Up to ``attempts`` tries inside ``timeout_s``, pausing ``first_backoff_s``,
    then twice as long each time, unless the backend says how long."""

    timeout_s: float
    attempts: int = 5
    first_backoff_s: float = 0.25
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def run(self, send: Callable[[float], T]) -> T:
        """``send(seconds left)``; raises its last ``Busy`` when out of tries or time."""
        deadline = self.clock() + self.timeout_s
        backoff = self.first_backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                return send(max(0.001, deadline - self.clock()))
            except Busy as busy:
                pause = backoff if busy.retry_after_s is None else busy.retry_after_s
                if attempt == self.attempts or self.clock() + pause >= deadline:
                    raise
                self.sleep(pause)
                backoff *= 2
        raise AssertionError("unreachable")  # the loop returns or raises
