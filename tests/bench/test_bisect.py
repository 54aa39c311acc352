"""perfkit bisect: the search against pairs with known steps and noise, then against
real releases of a small gateway, measured in pairs, that add known CPU per request
in a known function at a known version."""

from __future__ import annotations

import hashlib
import math
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._bench._bisect import bisect, releases_between
from litellm_perfkit._bench._bisect_journal import FunctionMove, Journal
from litellm_perfkit._bench._pairs import PairReading, SideReading, Sides, Unavailable
from tests.support.bisect_pairs import side_reading
from tests.support.documents import validate
from tests.support.fake_releases import release_wheels

pytestmark = pytest.mark.quiet

VERSIONS = [f"1.0.{n}" for n in range(16)]


def _side(cpu: float, auth: float) -> SideReading:
    return side_reading(cpu, served=500, stages={"auth": auth, "route": 0.5}, fast_paths={"layers": 1})


def paired(
    at: dict[str, float], noise: float = 0.01, seed: int = 1
) -> tuple[Callable[[str, str, Sides], PairReading], list[tuple[str, str]]]:
    """A fake pair: a base of 10 ms plus each relative step (in ``auth``) from its release on;
    each proxy's speed off by ``noise`` (relative, gaussian) for its life, as real ones are."""
    rng = random.Random(seed)
    calls: list[tuple[str, str]] = []

    def level(version: str) -> float:
        return 10.0 * math.prod(
            1 + size for release, size in at.items() if VERSIONS.index(version) >= VERSIONS.index(release)
        )

    def measure(lower: str, upper: str, first: Sides) -> PairReading:
        calls.append((lower, upper))
        a, b = level(lower), level(upper)
        return {
            "first": first,
            "cpu_log_ratio": None,
            "lower": _side(a * (1 + rng.gauss(0, noise)), a - 9.0),
            "upper": _side(b * (1 + rng.gauss(0, noise)), b - 9.0),
        }

    return measure, calls


def test_one_step_of_three_percent_is_found_with_its_size_and_stage() -> None:
    measure, calls = paired({"1.0.9": 0.03})
    result = bisect(VERSIONS, measure, Journal(None, {}))
    assert [(c["lower"], c["upper"]) for c in result["changes"]] == [("1.0.8", "1.0.9")] and result["complete"]
    change = result["changes"][0]
    assert change["interval"][0] > 1.0 and change["ratio"] == pytest.approx(1.03, abs=0.015)
    assert change["stages"][0][0] == "auth" and change["stages"][0][1] == pytest.approx(0.3, abs=0.05)
    assert len(set(calls)) <= 10  # a bisection, not a sweep of all 16
    assert result["resolution"]["after"] < 0.03 and not result["resolution"]["before_measured"]
    # The curve tiles the range, its steps multiplying to the whole ratio.
    curve = result["curve"]
    assert curve[0]["lower"] == "1.0.0" and curve[-1]["upper"] == "1.0.15"
    assert all(a["upper"] == b["lower"] for a, b in zip(curve, curve[1:]))
    assert math.prod(s["ratio"] for s in curve) == pytest.approx(1.03, abs=0.02)


def move(stage: str, function: str, change_ms: float, interval: tuple[float, float] | None = None) -> FunctionMove:
    return {
        "stage": stage,
        "function": function,
        "before_ms": 1.0,
        "after_ms": 1.0 + change_ms,
        "change_ms": change_ms,
        "interval": interval or (change_ms / 2, change_ms * 2),
    }


@pytest.mark.parametrize(
    ("found", "named"),
    [
        # The functions of the stage that moved first, the largest growth first; one elsewhere after.
        (
            [move("auth", "small", 0.1), move("route", "noise", 0.5), move("auth", "large", 0.3)],
            ["large", "small", "noise"],
        ),
        # The surest growth first: a noisy function's larger move whose interval nearly reaches zero
        # comes after one certain to have grown more (CI: pick_route +0.20 ms before check_quota +0.165).
        (
            [move("auth", "noisy", 0.2, (0.01, 0.39)), move("auth", "sure", 0.16, (0.14, 0.18))],
            ["sure", "noisy"],
        ),
        # None moved inside it (a stage of noise moved beside the one that grew): every stage's.
        ([move("route", "other", 0.1), move("parse", "grew", 0.4)], ["grew", "other"]),
        # None surely moved inside it (the stage that grew did not move beyond its interval): every
        # stage's, the surest first.
        (
            [move("auth", "flat", 0.05, (-0.1, 0.2)), move("route", "grew", 0.4, (0.3, 0.5))],
            ["grew", "flat"],
        ),
    ],
)
def test_the_functions_named_are_the_moved_stages_first_then_every_stages(
    found: list[FunctionMove], named: list[str]
) -> None:
    measure, _ = paired({"1.0.9": 0.03})
    asked: list[list[str]] = []

    def profile(lower: str, upper: str, stages: list[str]) -> list[FunctionMove]:
        asked.append(stages)
        return found

    result = bisect(VERSIONS, measure, Journal(None, {}), profile=profile)
    assert asked == [["auth", "route"]]  # the stage that moved first, then every other stage seen
    assert [m["function"] for m in result["changes"][0]["functions"]] == named


def test_two_steps_are_both_found() -> None:
    measure, _ = paired({"1.0.4": 0.05, "1.0.11": 0.04})
    result = bisect(VERSIONS, measure, Journal(None, {}))
    assert [c["upper"] for c in result["changes"]] == ["1.0.4", "1.0.11"]


def test_no_change_names_no_release_and_says_what_it_could_have_seen() -> None:
    measure, calls = paired({})
    result = bisect(VERSIONS, measure, Journal(None, {}))
    assert result["changes"] == [] and result["complete"] and set(calls) == {("1.0.0", "1.0.15")}
    assert [(s["lower"], s["upper"]) for s in result["curve"]] == [("1.0.0", "1.0.15")]
    assert result["curve"][0]["resolution"] <= 0.03


def test_a_slow_drift_is_a_curve_of_steps_each_with_its_interval() -> None:
    """Each release adds 1%: no release stands out from noise of 2%, the ends (+16%) do."""
    measure, _ = paired({v: 0.01 for v in VERSIONS[1:]}, noise=0.02)
    result = bisect(VERSIONS, measure, Journal(None, {}), max_pairs=4)
    whole, curve = result["whole"], result["curve"]
    assert whole is not None and whole["interval"][0] < 1.01**15 < whole["interval"][1]
    assert len(curve) >= 4 and all(s["resolution"] > 0 for s in curve)
    # Each step's interval holds its true ratio (95% intervals: most of them).
    truths = [1.01 ** (VERSIONS.index(s["upper"]) - VERSIONS.index(s["lower"])) for s in curve]
    assert sum(s["interval"][0] <= t <= s["interval"][1] for s, t in zip(curve, truths)) >= 0.75 * len(curve)


def test_resolution_chooses_the_number_of_pairs() -> None:
    wide, _ = paired({}, noise=0.02)
    narrow, _ = paired({}, noise=0.02)
    coarse = bisect(VERSIONS, wide, Journal(None, {}), target=0.05)
    fine = bisect(VERSIONS, narrow, Journal(None, {}), target=0.015, max_pairs=20)
    assert coarse["curve"][0]["pairs"] < fine["curve"][0]["pairs"]
    assert fine["curve"][0]["resolution"] <= 0.015 < coarse["curve"][0]["resolution"]


def test_the_budget_leaves_the_ranges_still_open() -> None:
    measure, _ = paired({"1.0.9": 0.05})
    now = [0.0]

    def measured(lower: str, upper: str, first: Sides) -> PairReading:
        now[0] += 60  # a minute per pair
        return measure(lower, upper, first)

    result = bisect(VERSIONS, measured, Journal(None, {}), budget_s=600, clock=lambda: now[0])
    assert not result["complete"] and result["changes"] == []
    ranges = [(VERSIONS.index(low), VERSIONS.index(high), between) for low, high, between in result["unresolved"]]
    assert any(low < 9 <= high for low, high, _ in ranges)
    assert all(between == high - low - 1 for low, high, between in ranges)


def test_a_rerun_resumes_from_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.json"
    measure, calls = paired({"1.0.9": 0.05})
    first = bisect(VERSIONS, measure, Journal.open(path, {"metric": "cpu"}))
    measured = len(calls)
    again = bisect(VERSIONS, measure, Journal.open(path, {"metric": "cpu"}))
    assert len(calls) == measured and orjson.loads(orjson.dumps(again["changes"])) == orjson.loads(
        orjson.dumps(first["changes"])
    )
    document = orjson.loads(path.read_bytes())
    assert document["schema"] == "perfkit.bisect/2" and document["result"]["changes"][0]["upper"] == "1.0.9"
    with pytest.raises(ValueError, match="other settings"):
        Journal.open(path, {"metric": "rps"})


def test_pairs_measured_earlier_are_reused_and_tell_the_noise() -> None:
    measure, calls = paired({"1.0.9": 0.05})
    earlier = Journal(None, {})
    bisect(VERSIONS, measure, earlier)
    measured = len(calls)
    again = bisect(VERSIONS, measure, Journal(None, {}), known=earlier.pairs)
    # Pairs of the same two releases are reused; the noise known from the start may ask for a pair more.
    assert len(calls) - measured <= 2
    assert again["resolution"]["before_measured"] and [c["upper"] for c in again["changes"]] == ["1.0.9"]


def test_releases_that_do_not_install_are_gone_around() -> None:
    measure, _ = paired({"1.0.9": 0.05})

    def prepare(version: str) -> None:
        if version in ("1.0.7", "1.0.8", "1.0.11"):
            raise Unavailable(version, "needs a certifi the registry lacks")

    result = bisect(VERSIONS, measure, Journal(None, {}), prepare=prepare)
    # 1.0.8 cannot tell: the change is named between the last release measured before it and 1.0.9.
    assert [(c["lower"], c["upper"]) for c in result["changes"]] == [("1.0.6", "1.0.9")]
    assert set(result["unavailable"]) <= {"1.0.7", "1.0.8", "1.0.11"} and "1.0.8" in result["unavailable"]


def test_releases_between_orders_filters_and_skips_pre_releases() -> None:
    available = ["1.0.10", "1.0.2", "1.1.0rc1", "1.0.9", "2.0.0", "0.9", "junk"]
    assert releases_between(available, "1.0.2", "1.1.0") == ["1.0.2", "1.0.9", "1.0.10", "1.1.0"]
    assert releases_between(available, "1.0.2", "1.1.0", pre=True) == ["1.0.2", "1.0.9", "1.0.10", "1.1.0rc1", "1.1.0"]
    with pytest.raises(ValueError, match="give versions like"):
        releases_between(available, "one", "1.1.0")


# -- real releases of a small gateway, measured in pairs -----------------------
HASHED = {"check_key": 4_000_000, "pick_route": 1_000_000}
"""The releases' work: 5 MB hashed per request, about two thirds of the gateway's CPU per request."""
STEP = 230_000
"""Bytes 1.0.1 hashes more per request, in check_quota inside auth: about 3% of the CPU per request."""


def hashing_ms_per_byte() -> float:
    """What hashing costs on this machine now, in CPU ms per byte: the step's truth."""
    data = bytes(range(256)) * 4_000
    started = time.process_time()
    for _ in range(200):
        hashlib.sha256(data).digest()
    return (time.process_time() - started) * 1e3 / (200 * len(data))


@pytest.mark.integration
def test_bisect_names_the_release_its_stage_and_its_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three releases; 1.0.1 adds about 3% to the CPU per request, in one function of one
    stage. Measured in pairs on this machine as it is (its noise, other work on it):
    bisect names that release, its ratio within 1.5% of the truth, and the function
    with its stage (after any of a stage of noise that moved). This gateway's pair noise is below 1% (docs/bisect.md), so a few
    pairs a comparison resolve 1.5%."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    release_wheels(wheels, {f"1.0.{n}": {**HASHED, "check_quota": STEP if n >= 1 else 0} for n in range(3)})
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))

    def command(journal: Path, *more: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "litellm_perfkit._cli",
            "bisect",
            "--package",
            "fakegw",
            "--good",
            "1.0.0",
            "--bad",
            "1.0.2",
            "--pip-args",
            f"--no-index --find-links {wheels}",
            "--proxy-command",
            "{python} -m fakegw --port {port} --upstream {upstream}",
            "--out",
            str(journal),
            *more,
            "--duration",
            "4s",
            "--warmup",
            "100r",
            "--concurrency",
            "2",
            "--resolution",
            "1.5%",
            "--max-pairs",
            "6",  # a comparison stops once it resolves 1.5%: past 4 only when the machine is noisy
            "--ttft-ms",
            "2",
            "--itl-ms",
            "0",
            "--chunks",
            "3",
            "--prompt-repeats",
            "5",
        ]

    journal = tmp_path / "bisect.json"
    result = subprocess.run(command(journal), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    document = orjson.loads(journal.read_bytes())
    validate(document, "bisect")
    answer = document["result"]
    assert [(c["lower"], c["upper"]) for c in answer["changes"]] == [("1.0.0", "1.0.1")], result.stdout
    (change,) = answer["changes"]
    # The truth: the step's CPU (its bytes at what hashing costs now) over the lower release's CPU per request.
    lower_ms = statistics.fmean(p["lower"]["cpu_ms"] for p in document["pairs"]["1.0.0..1.0.1"])
    truth = 1 + STEP * hashing_ms_per_byte() / lower_ms
    assert change["interval"][0] > 1.0 and abs(change["ratio"] - truth) <= 0.015, (truth, change)
    # check_quota is named in auth, first unless a stage of noise moved with a function of its own
    # beyond its interval (both pick_route in route in 2 of 3 .ci/runs): those come first.
    named = [(m["function"].split(" (")[0], m["stage"]) for m in change["functions"]]
    moved = {name for name, _, _ in change["stages"]}
    assert ("check_quota", "auth") in named, (change["stages"], change["functions"], result.stderr[-3000:])
    ahead = named[: named.index(("check_quota", "auth"))]
    assert all(stage in moved and stage != "auth" for _, stage in ahead), (change["stages"], change["functions"])
    assert answer["resolution"]["after"] < 0.015, answer["resolution"]
    assert "changed in fakegw 1.0.1 (after 1.0.0)" in result.stdout and "function check_quota" in result.stdout
    # A rerun finds the answer in the journal; another journal of the same releases reuses every pair.
    again = subprocess.run(command(journal), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "measuring" not in again.stderr and "holds a complete answer" in again.stderr
    fresh = subprocess.run(
        command(tmp_path / "fresh.json", "--functions", "off"), capture_output=True, text=True, timeout=300
    )
    assert fresh.returncode == 0 and "measuring" not in fresh.stderr and "reusing" in fresh.stderr, fresh.stderr[-2000:]
    assert "changed in fakegw 1.0.1 (after 1.0.0)" in fresh.stdout


def test_the_html_report_draws_a_journal(tmp_path: Path) -> None:
    journal = tmp_path / "bisect.json"
    measure, _ = paired({"1.0.9": 0.05})
    bisect(VERSIONS, measure, Journal.open(journal, {"package": "litellm", "metric": "cpu"}))
    out = tmp_path / "bisect.html"
    result = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "report", str(journal), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert 'id="bisect-0"' in page and "<td>1.0.9</td><td>1.0.8</td>" in page and "auth +0.500 ms" in page
