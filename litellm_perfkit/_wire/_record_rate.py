"""The record rate (``PERFKIT_RECORD_RATE``) as ``perfkit run`` passes it to
the proxy's workers and the core reads it: ``all``, or recorded requests a
second per process (docs/configuration.md)."""

from __future__ import annotations

from collections.abc import Mapping

from ..types import RecordRate
from ._environment_variables import PERFKIT_RECORD_RATE

__all__ = ["DEFAULT_RECORD_RATE", "parse_record_rate", "record_rate_in"]

DEFAULT_RECORD_RATE = 10.0


def parse_record_rate(raw: str) -> RecordRate:
    """``all`` or a positive number of requests a second; ValueError otherwise."""
    text = raw.strip().lower()
    if text == "all":
        return "all"
    value = float(text)
    if not 0.0 < value < float("inf"):
        raise ValueError(raw)
    return value


def record_rate_in(env: Mapping[str, str]) -> RecordRate | None:
    """The rate ``env`` sets: the default when unset or empty, None when its value is bad."""
    raw = env.get(PERFKIT_RECORD_RATE, "").strip()
    if not raw:
        return DEFAULT_RECORD_RATE
    try:
        return parse_record_rate(raw)
    except ValueError:
        return None
