from __future__ import annotations

import random

from litellm_perfkit._core._timeline import decode
from tests.support.timelines import sample_timeline


def test_encode_and_decode_keep_every_field() -> None:
    for seed in range(20):
        timeline = sample_timeline(random.Random(seed))
        assert decode(timeline.encode()) == timeline.freeze()


def test_values_json_would_lose_are_kept() -> None:
    timeline = sample_timeline()
    timeline.attributes.update(huge=1 << 70, infinite=float("inf"), surrogate="\ud800")
    assert decode(timeline.encode()) == timeline.freeze()
