"""Every pair of releases measured, kept under ``$PERFKIT_CACHE_DIR``: a later bisect
or version sweep of the same two releases, with the same settings, reuses them,
and every pair of those settings tells the pair noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ._bisect_journal import pair_key
from ._options import BenchOptions
from ._pairs import PairReading, Sides

__all__ = ["PairStore", "STORE_NAME", "pair_settings"]

STORE_NAME = "pairs.jsonl"
PAIR_BURSTS = "together"
"""How a pair's bursts reach its proxies (``_together``): pairs measured otherwise (taking turns) are not reused."""


def pair_settings(options: BenchOptions, package: str, pip_args: list[str]) -> dict[str, Any]:
    """What a pair's reading depends on besides its two releases: pairs measured with these are reused."""
    return {
        "package": package,
        "proxy_command": options.proxy_command,
        "pip_args": pip_args,
        "config": options.config,
        "provider": options.provider,
        "concurrency": options.concurrency,
        "duration_s": options.duration_s,
        "warmup": [options.warmup_s, options.warmup_requests],
        "prompt_repeats": options.prompt_repeats,
        "ttft_ms": options.ttft_ms,
        "itl_ms": options.itl_ms,
        "chunks": options.chunks,
        "bursts": PAIR_BURSTS,
    }


def _swapped(reading: PairReading) -> PairReading:
    first: Sides = "upper" if reading["first"] == "lower" else "lower"
    ratio = reading["cpu_log_ratio"]
    return {
        "first": first,
        "lower": reading["upper"],
        "upper": reading["lower"],
        "cpu_log_ratio": None if ratio is None else -ratio,
    }


class PairStore:
    """One JSON line per pair: the settings it was measured with, its two releases, the reading."""

    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        self.path = path
        self.settings = orjson.loads(orjson.dumps(settings))  # as it reads back

    def _lines(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_bytes().splitlines():
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:  # a line cut short by a stop: the rest is good
                continue
            if isinstance(entry, dict) and entry.get("settings") == self.settings:
                found.append(entry)
        return found

    def known(self) -> dict[str, list[PairReading]]:
        """Every pair of these settings, by pair_key (lower..upper as measured)."""
        known: dict[str, list[PairReading]] = {}
        for entry in self._lines():
            known.setdefault(pair_key(entry["lower"], entry["upper"]), []).append(entry["reading"])
        return known

    def pairs(self, lower: str, upper: str) -> list[PairReading]:
        """The pairs of these two releases, measured in either order, as ``lower``..``upper``."""
        found = []
        for entry in self._lines():
            if (entry["lower"], entry["upper"]) == (lower, upper):
                found.append(entry["reading"])
            elif (entry["lower"], entry["upper"]) == (upper, lower):
                found.append(_swapped(entry["reading"]))
        return found

    def add(self, lower: str, upper: str, reading: PairReading) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = orjson.dumps({"settings": self.settings, "lower": lower, "upper": upper, "reading": reading})
        with self.path.open("ab") as out:
            out.write(line + b"\n")
