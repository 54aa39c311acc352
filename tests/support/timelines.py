"""Timelines with every declared field set, and what tests compare: both
from the fields' one declaration (types.RequestRecord, _core/_fields.py)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from litellm_perfkit._core._backend import ACTIVE
from litellm_perfkit._core._timeline import LAYOUT
from litellm_perfkit.types import RequestRecord
from tests.support.speedups import STAGE_NAMES

ANNOTATIONS = {f.name: str(f.type) for f in dataclasses.fields(RequestRecord)}


def _value(name: str, rng: random.Random) -> Any:
    kind = ANNOTATIONS.get(name)
    if name == "finished":
        return [(i, rng.choice(STAGE_NAMES), i * 1000, i * 1000 + 5, i - 1) for i in range(rng.randrange(1, 5))]
    if name == "generators":
        return {
            "stream.iterate": [9, 1, 2, -1, 3, 4, "generator", []],
            "stream.upstream_wait": [10, 1, 5, -1, 3, 2, "sum", [1, 2, -1, 4, 5, -1]],
        }
    if kind == "int":
        return rng.randrange(1, 10**12)
    if kind == "bool":
        return True
    if kind == "str":
        return rng.choice(["POST", "/v1/chat/completions", "/é"])
    if kind == "str | None":
        return rng.choice([None, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "client_disconnected"])
    if kind == "dict[str, int]":
        return {"headers_sent": rng.randrange(10**15), "last_byte": rng.randrange(10**15)}
    if kind == "dict[str, AttributeValue]":
        return {"model": "gpt-x", "workers": 2, "ratio": 0.5, "fast": True}
    if kind == "list[int]":
        return [rng.randrange(10**15) for _ in range(4 * rng.randrange(1, 4))]
    if kind == "tuple[str, ...]":
        return ("llm_call", "upstream")
    if kind == "tuple[str, str] | None":
        return rng.choice([None, ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")])
    raise AssertionError(f"tests/support/timelines.py cannot fill a field annotated {kind!r} ({name})")


def sample_timeline(rng: random.Random | None = None, cls: type = ACTIVE.timeline) -> Any:
    """A timeline with every encoded field set to a value other than its default."""
    rng = rng or random.Random(1)
    timeline = cls(rng.randrange(10**15))
    for name in LAYOUT.encoded:
        setattr(timeline, name, _value(name, rng))
    timeline.next_index = len(timeline.finished) + len(timeline.generators)
    return timeline


def observable(timeline: Any) -> dict[str, Any]:
    """Every field a request records (all of RequestRecord's but the derived stages)."""
    return {name: getattr(timeline, name) for name in LAYOUT.encoded}
