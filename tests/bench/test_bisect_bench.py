"""What perfkit bisect reads from a pair's per-stage profiles."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from litellm_perfkit._bench._bisect_bench import _stage_recordings, render_bisect
from litellm_perfkit._bench._bisect_journal import BisectResult, Step
from litellm_perfkit._profile._stages import StageProfiler


def _write_profile(directory: Path, samples: list[tuple[list[int], float]], frames: list[dict[str, object]]) -> None:
    directory.mkdir()
    document = {
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": "auth",
                "unit": "seconds",
                "samples": [stack for stack, _ in samples],
                "weights": [weight for _, weight in samples],
            }
        ],
    }
    (directory / "worker-1.speedscope.json").write_bytes(orjson.dumps(document))


def test_the_profilers_own_samples_are_left_out_of_a_stages_functions(tmp_path: Path) -> None:
    handler = StageProfiler._sample.__code__
    frames: list[dict[str, object]] = [
        {"name": "handle", "file": "/venv/site-packages/litellm/proxy/auth.py", "line": 1},
        {"name": "check_key", "file": "/venv/site-packages/litellm/proxy/auth.py", "line": 9},
        # A SIGPROF that met the handler still running: the profiler's CPU, whatever it interrupted.
        {"name": handler.co_name, "file": handler.co_filename, "line": handler.co_firstlineno},
        # A function of the same name elsewhere is the host's.
        {"name": handler.co_name, "file": "/venv/site-packages/litellm/router.py", "line": 3},
    ]
    _write_profile(
        tmp_path / "side",
        [([0, 1], 0.004), ([0, 1, 2], 0.004), ([0, 2], 0.008), ([0, 3], 0.002)],
        frames,
    )

    recordings = _stage_recordings(tmp_path / "side", served=2)

    stacks = recordings["auth"].stacks
    assert stacks == {
        ("handle (auth.py)", "check_key (auth.py)"): pytest.approx(2.0),  # 4 ms over 2 requests
        ("handle (auth.py)", "_sample (router.py)"): pytest.approx(1.0),
    }


def _step(lower: str, upper: str, ratio: float, between: int = 0) -> Step:
    return {
        "lower": lower,
        "upper": upper,
        "between": between,
        "ratio": ratio,
        "interval": (ratio - 0.02, ratio + 0.02),
        "difference": 0.1,
        "difference_interval": (-0.1, 0.3),
        "resolution": 0.02,
        "pairs": 3,
    }


def test_a_search_the_budget_stopped_says_so_and_where_its_curve_has_a_gap() -> None:
    versions = ["1.0.0", "1.0.1", "1.0.2", "1.0.3"]
    result: BisectResult = {
        "metric": "cpu",
        "changes": [],
        "whole": _step("1.0.0", "1.0.3", 1.14, between=2),
        "curve": [_step("1.0.0", "1.0.1", 1.0), _step("1.0.2", "1.0.3", 1.0)],
        "unresolved": [("1.0.1", "1.0.2", 0)],
        "resolution": {"before": 0.03, "before_measured": True, "after": 0.02, "pairs": 3, "noise": 0.02, "freedom": 9},
        "complete": False,
        "unavailable": {},
    }

    stopped = render_bisect(result, versions, "litellm")

    assert "the steps multiply to 1.000 from 1.0.0 to 1.0.3, without 1.0.1 to 1.0.2 (not compared" in stopped
    assert "no release named between 1.0.0 and 1.0.3 yet: the budget ran out" in stopped
    assert "no single release moved" not in stopped
    assert "not compared (budget spent): 1.0.1 to 1.0.2" in stopped

    curve = [result["curve"][0], _step("1.0.1", "1.0.2", 1.0), result["curve"][1]]
    ended = render_bisect({**result, "curve": curve, "unresolved": [], "complete": True}, versions, "litellm")
    assert "without" not in ended and "no single release moved the metric beyond its interval" in ended
