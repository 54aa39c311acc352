"""perfkit bench --perturbation: interleaved pairs of the same proxy, plain and under perfkit run."""

from __future__ import annotations

import io
import math
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._bench import BenchError, BenchOptions
from litellm_perfkit._bench._perturbation import ratio, render_perturbation, run_perturbation
from tests.support.documents import validate
from tests.support.litellm_env import VERSIONS

pytestmark = pytest.mark.quiet


def test_ratio_is_the_geometric_mean_of_the_pairs_with_an_interval() -> None:
    pairs = [(100.0, 110.0), (90.0, 99.0), (120.0, 132.0), (80.0, 88.0)]  # every pair 1.1
    assert ratio(pairs) == {"geometric_mean": 1.1, "low": 1.1, "high": 1.1, "median": 1.1, "pairs": 4}
    noisy = [(100.0, 105.0), (100.0, 95.0), (100.0, 112.0), (100.0, 101.0), (100.0, 108.0), (100.0, 97.0)]
    result = ratio(noisy)
    expected = math.exp(sum(math.log(b / a) for a, b in noisy) / len(noisy))
    assert result["geometric_mean"] == pytest.approx(expected, abs=1e-4)
    assert result["low"] < 1.0 < result["high"]  # a 3% mean over +-8% noise: not resolved by 6 pairs
    assert result["low"] <= result["geometric_mean"] <= result["high"]


def test_one_proxy_only() -> None:
    with pytest.raises(BenchError, match="one --litellm-version"):
        run_perturbation(BenchOptions(litellm_versions=("1.83.14", "1.103.0"), log=io.StringIO()))
    with pytest.raises(BenchError, match="drop --proxy-url"):
        run_perturbation(BenchOptions(proxy_url="http://127.0.0.1:1", log=io.StringIO()))


@pytest.mark.integration
@pytest.mark.litellm
def test_real_proxy_plain_and_under_perfkit(tmp_path: Path) -> None:
    out = tmp_path / "perturbation.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "litellm_perfkit._cli",
            "bench",
            "--perturbation",
            "--litellm-version",
            VERSIONS[-1],
            "--repeats",
            "2",
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--concurrency",
            "4",
            "--stream-concurrency",
            "2",
            "--chunks",
            "5",
            "--progress",
            "off",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    document = orjson.loads(out.read_bytes())
    validate(document, "perturbation")
    assert document["complete"] and document["litellm_version"] == VERSIONS[-1]
    assert [pair["order"] for pair in document["pairs"]] == [["plain", "perfkit"], ["perfkit", "plain"]]
    for pair in document["pairs"]:
        for phase in ("nonstream", "stream"):
            plain, perfkit = pair[phase]["plain"], pair[phase]["perfkit"]
            assert plain["rps"] > 0 and perfkit["rps"] > 0
            assert plain["agent_cpu_ms_per_request"] == 0.0  # no export agent without perfkit
            assert perfkit["agent_cpu_ms_per_request"] > 0  # spans were exported
            assert perfkit["cpu_ms_per_request"] > perfkit["agent_cpu_ms_per_request"]
    for phase in ("nonstream", "stream"):
        cpu = document[phase]["cpu_ratio"]
        # Not a bound on perfkit's cost (2 short pairs on a shared machine): that the ratio is a ratio of like with like.
        assert (
            0.5 < cpu["geometric_mean"] < 2.0
            and cpu["low"] <= cpu["geometric_mean"] <= cpu["high"]
            and cpu["pairs"] == 2
        )
    text = result.stdout
    assert "perturbation: LiteLLM 1.103.0" in text and "CPU ms per request" in text and "fewer than 4 pairs" in text
    assert render_perturbation(document) in text
