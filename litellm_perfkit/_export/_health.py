"""``perfkit run``'s health line on exit: requests, recorded, exported, dropped, internal errors.

Each process that exported writes what it counted, when its pipeline shuts
down, to ``PID.health`` in the run's snapshot directory
(``PERFKIT_PROMETHEUS_DIR``, one per run, whose ``*.json`` are the metric
snapshots); the process ``perfkit run`` became sums every file into one line
on stderr as it exits, once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson

__all__ = ["FIELDS", "health_line", "print_health_once", "write_health"]

FIELDS = ("requests", "recorded", "exported_spans", "dropped_spans", "dropped_requests", "internal_errors")
_SUFFIX = ".health"
_printed: list[bool] = []


def write_health(directory: str, counts: dict[str, int]) -> None:
    """This process's counts (a rename: a reader never sees half a file)."""
    path = Path(directory) / f"{os.getpid()}{_SUFFIX}"
    partial = path.with_suffix(".health-partial")
    partial.write_bytes(orjson.dumps({name: int(counts.get(name, 0)) for name in FIELDS}))
    partial.replace(path)


def health_line(directory: str) -> str | None:
    """The sum over every process's counts, as one line; None when none wrote any."""
    totals = dict.fromkeys(FIELDS, 0)
    found = False
    for path in Path(directory).glob(f"*{_SUFFIX}"):
        try:
            counts = orjson.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        found = True
        for name in FIELDS:
            totals[name] += int(counts.get(name, 0))
    if not found:
        return None
    return (
        f"perfkit run: requests {totals['requests']}, recorded {totals['recorded']}, "
        f"exported {totals['exported_spans']} spans, dropped {totals['dropped_spans']} spans and "
        f"{totals['dropped_requests']} requests, internal errors {totals['internal_errors']}"
    )


def print_health_once(directory: str) -> None:
    """Print the line to stderr, once per process; nothing when no process exported."""
    if _printed:
        return
    line = health_line(directory)
    if line is not None:
        _printed.append(True)
        print(line, file=sys.stderr, flush=True)
