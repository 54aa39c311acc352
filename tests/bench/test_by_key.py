"""The master key against a virtual key, interleaved on one proxy (_bench/_by_key.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from litellm_perfkit._bench import _by_key
from litellm_perfkit._bench._by_key import by_key, compare_keys
from litellm_perfkit._load._workload import key_index


def _breakdown(cpu: dict[str, list[float]]) -> Any:
    return {"joined_requests": len(next(iter(cpu.values()))), "samples": {"stage_cpu_ms": cpu}}


def _split(rng: random.Random, auth: tuple[float, float], other: float, n: int = 200) -> Any:
    """One repeat: per-request auth CPU around each key's mean, another stage the same for both."""
    return {
        kind: _breakdown(
            {
                "auth": [rng.gauss(mean, 0.5) for _ in range(n)],
                "llm_call": [rng.gauss(other, 0.5) for _ in range(n)],
            }
        )
        for kind, mean in zip(("master", "virtual"), auth)
    }


def test_a_known_difference_in_auth_is_found_with_its_interval() -> None:
    rng = random.Random(7)
    keys = compare_keys([_split(rng, (3.0, 5.0), 4.0) for _ in range(3)])
    assert keys["requests"] == {"master": 600, "virtual": 600}
    [auth] = keys["stages"]  # llm_call does not differ: only auth, which is always shown
    assert auth["stage"] == "auth" and auth["verdict"] == "worse"
    assert auth["master_ms"] == pytest.approx(3.0, abs=0.1) and auth["virtual_ms"] == pytest.approx(5.0, abs=0.1)
    assert auth["low_ms"] is not None and auth["high_ms"] is not None
    assert 0 < auth["low_ms"] < 2.0 < auth["high_ms"]


def test_auth_is_shown_when_the_keys_do_not_differ_and_a_stage_that_does_is_added() -> None:
    rng = random.Random(8)
    splits = [_split(rng, (3.0, 3.0), 4.0) for _ in range(3)]
    for split in splits:  # the virtual key's requests pay 1 ms more in llm_call
        cpu = split["virtual"]["samples"]["stage_cpu_ms"]
        cpu["llm_call"] = [v + 1.0 for v in cpu["llm_call"]]
    stages = compare_keys(splits)["stages"]
    assert [(s["stage"], s["verdict"]) for s in stages] == [("auth", "noise"), ("llm_call", "worse")]


def test_the_requests_are_split_by_the_key_their_trace_id_names(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[int, set[str]] = {}

    def breakdown(spans: list[dict[str, Any]], ids: set[str]) -> Any:
        seen[len(seen)] = ids
        return _breakdown({"auth": [0.0]})

    monkeypatch.setattr(_by_key, "stage_breakdown", breakdown)
    ids = {f"{random.Random(n).getrandbits(128):032x}" for n in range(50)}
    split = by_key([], ids)
    assert set(split) == {"master", "virtual"}
    assert seen[0] | seen[1] == ids and not seen[0] & seen[1]
    assert all(key_index(t, 2) == 0 for t in seen[0]) and all(key_index(t, 2) == 1 for t in seen[1])
