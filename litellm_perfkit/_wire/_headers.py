"""Header formats: W3C Server-Timing (written on the request path, and read) and W3C traceparent (read)."""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "ENTRY_PREFIXES",
    "THOUSANDTHS",
    "entry_prefix",
    "format_ms",
    "format_server_timing",
    "format_traceparent",
    "metric_name",
    "stage_span_id",
    "parse_server_timing",
    "parse_traceparent",
    "server_timing_entry",
]

_NOT_TCHAR = re.compile(r"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")
_SERVER_TIMING_DUR = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[^,]*?;\s*dur=([0-9.]+)")
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
ENTRY_PREFIXES: dict[str, str] = {}  # stage name -> "token;dur=", filled by entry_prefix()
_MAX_NAMES = 1024  # stage names come from code, but the cache never grows unbounded


def metric_name(stage: str) -> str:
    """A stage name as a Server-Timing metric name (an RFC 9110 token)."""
    return _NOT_TCHAR.sub("_", stage) or "_"


def entry_prefix(stage: str) -> str:
    """``auth;dur=``: the constant start of a stage's Server-Timing entry (cached per name)."""
    prefix = ENTRY_PREFIXES.get(stage)
    if prefix is None:
        prefix = metric_name(stage) + ";dur="
        if len(ENTRY_PREFIXES) < _MAX_NAMES:
            ENTRY_PREFIXES[stage] = prefix
    return prefix


THOUSANDTHS = [f".{n:03d}" for n in range(1000)]


def format_ms(duration_ns: int) -> str:
    """``0.410``: nanoseconds as milliseconds with 3 decimals (rounded half up).

    Integer arithmetic and a table instead of a float format: this runs for
    every stage of every request, and ``f"{x:.3f}"`` costs several times more.
    """
    us = (duration_ns + 500) // 1000 if duration_ns > 0 else 0
    return str(us // 1000) + THOUSANDTHS[us % 1000]


def server_timing_entry(stage: str, duration_ns: int) -> str:
    """``auth;dur=0.410``: one Server-Timing metric, duration in ms."""
    return (ENTRY_PREFIXES.get(stage) or entry_prefix(stage)) + format_ms(duration_ns)


def format_server_timing(stages: list[tuple[str, int]]) -> bytes:
    """``auth;dur=0.410, upstream;dur=61.200`` from (name, duration_ns) pairs."""
    return ", ".join(server_timing_entry(name, ns) for name, ns in stages).encode("ascii")


def parse_server_timing(value: str) -> dict[str, float]:
    """Milliseconds per metric name of a Server-Timing header; a name that
    appears several times (a stage entered twice) is summed."""
    totals: dict[str, float] = {}
    for name, duration in _SERVER_TIMING_DUR.findall(value):
        try:
            totals[name] = totals.get(name, 0.0) + float(duration)
        except ValueError:  # "1.2.3" matches [0-9.]+
            continue
    return totals


def format_traceparent(trace_id: str, span_id: str, flags: int = 1) -> str:
    """A W3C traceparent (version 00) from hex ids; ``parse_traceparent`` reads it back."""
    return f"00-{trace_id}-{span_id}-{flags:02x}"


def stage_span_id(request_span_id: str, name: str, start_ns: int) -> str:
    """A stage span's id, as hex, when its request's span id was chosen while
    it ran (a host that traces): the recorder makes the stage the current
    span under this id, and the exporter gives its span the same one,
    without the id travelling in the record."""
    digest = hashlib.blake2b(f"{request_span_id}:{name}:{start_ns}".encode(), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def parse_traceparent(value: str | None) -> tuple[str, str, int] | None:
    """(trace_id, parent_span_id, flags) of a valid W3C traceparent, else None."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return trace_id, span_id, int(flags, 16)
