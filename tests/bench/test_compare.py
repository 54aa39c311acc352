"""compare: an A/A pair is noise, an injected 10% regression is real."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import orjson

from litellm_perfkit._bench._compare import compare, regressions, render_compare
from litellm_perfkit._wire._names import EVENT_LOOP_STAGE, PROTOCOL_STAGE

# Bootstrap rounds for the verdicts on these fixed seeds: a fifth of the product's
# 1,000, so each call takes a fifth of the CPU.
ROUNDS = 200


def fake_result(
    seed: int, slowdown: float = 1.0, auth_slowdown: float = 1.0, label: str = "x", repeats: int = 5, drift: float = 0.0
) -> dict:  # type: ignore[type-arg]
    """A bench document like a real one: log-normal per-request values, kept
    per repeat, each repeat shifted by a random run-to-run drift (+-``drift``)."""
    rng = random.Random(seed)

    def lat(median: float, n: int, factor: float, shift: float) -> list[float]:
        return [round(rng.lognormvariate(0, 0.25) * median * factor * shift, 4) for _ in range(n)]

    runs = []
    for _ in range(repeats):
        shift = 1 + rng.uniform(-drift, drift)
        auth, other = lat(2.0, 300, auth_slowdown, shift), lat(1.0, 300, 1.0, shift)
        runs.append(
            {
                "lat": lat(120, 300, slowdown, shift),
                "ttft": lat(80, 150, slowdown, shift),
                "e2e": lat(200, 150, slowdown, shift),
                "auth": auth,
                "route": other,
                "overhead": [a + o for a, o in zip(auth, other)],
            }
        )
    return {
        "schema": "perfkit.bench/1",
        "label": label,
        "samples": {
            "nonstream_latency_ms": [r["lat"] for r in runs],
            "stream_ttft_ms": [r["ttft"] for r in runs],
            "stream_e2e_ms": [r["e2e"] for r in runs],
            "rps_repeats": [50 / slowdown * rng.uniform(0.95, 1.05) for _ in range(repeats)],
            "streams_per_s_repeats": [20 / slowdown * rng.uniform(0.95, 1.05) for _ in range(repeats)],
            "server_overhead_ms": [r["overhead"] for r in runs],
            "stage_self_ms": {"auth": [r["auth"] for r in runs], "route": [r["route"] for r in runs]},
            # own CPU: auth's CPU is most of its time, and slows with it
            "stage_cpu_ms": {
                "auth": [[v * 0.8 for v in r["auth"]] for r in runs],
                "route": [[v * 0.5 for v in r["route"]] for r in runs],
            },
        },
    }


def perfkit_compare(*args: str) -> subprocess.CompletedProcess[str]:
    """``perfkit compare ARGS`` as a user runs it, with its exit code and output."""
    command = [sys.executable, "-m", "litellm_perfkit._cli", "compare", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_an_a_a_comparison_is_noise() -> None:
    deltas = compare(fake_result(1), fake_result(2), rounds=ROUNDS)
    assert {d.verdict for d in deltas} == {"noise"}, [(d.metric, d.low, d.high) for d in deltas if d.verdict != "noise"]
    assert regressions(deltas, 0.0) == []


def test_an_injected_10_percent_regression_is_real() -> None:
    deltas = {
        d.metric: d for d in compare(fake_result(1), fake_result(2, slowdown=1.10, auth_slowdown=1.10), rounds=ROUNDS)
    }
    for metric in ("latency p50 ms", "streaming TTFT p50 ms", "full stream p50 ms"):
        assert deltas[metric].verdict == "worse"
        assert 0.05 < deltas[metric].relative < 0.15  # type: ignore[operator]
    assert deltas["non-streaming RPS"].verdict == "worse"
    assert deltas["stage auth (mean self ms)"].verdict == "worse"
    assert deltas["stage route (mean self ms)"].verdict == "noise"


def test_run_to_run_drift_is_in_the_intervals() -> None:
    """Identical setups whose repeats drift by +-10% (as real proxies here do):
    resampling repeats keeps false alarms near the nominal 5%. Resampling
    requests alone would call most of these pairs different."""
    false_alarms = total = 0
    for pair in range(12):
        deltas = compare(fake_result(100 + 2 * pair, drift=0.10), fake_result(101 + 2 * pair, drift=0.10), rounds=100)
        false_alarms += sum(d.verdict != "noise" for d in deltas)
        total += len(deltas)
    assert false_alarms / total <= 0.2


def test_one_repeat_is_flagged_in_the_output() -> None:
    deltas = compare(fake_result(1, repeats=1), fake_result(2, repeats=1), rounds=ROUNDS)
    assert "warning: 1 and 1 repeat(s)" in render_compare("a", "b", deltas, (1, 1))


def test_per_stage_deltas_explain_the_total() -> None:
    deltas = compare(fake_result(1), fake_result(2, auth_slowdown=1.5), rounds=ROUNDS)
    text = render_compare("main", "branch", deltas)
    assert "stages that explain the change in server overhead:" in text and "auth:" in text


def test_stages_outside_the_requests_wall_time_explain_none_of_the_overhead_change() -> None:
    """``event_loop`` (the loop's CPU between steps) and ``protocol`` (parsing before the app) grow with the
    overhead here, but are no part of it: only ``auth`` explains the change."""
    a, b = fake_result(1), fake_result(2, auth_slowdown=1.5)
    for document, factor in ((a, 1.0), (b, 2.0)):
        per_repeat = document["samples"]["stage_self_ms"]["auth"]
        for name in (EVENT_LOOP_STAGE, PROTOCOL_STAGE):
            document["samples"]["stage_self_ms"][name] = [[v * factor for v in repeat] for repeat in per_repeat]
    deltas = compare(a, b, rounds=ROUNDS)
    worse = {d.metric for d in deltas if d.verdict == "worse"}
    assert {f"stage {name} (mean self ms)" for name in (EVENT_LOOP_STAGE, PROTOCOL_STAGE)} <= worse
    explained = render_compare("main", "branch", deltas).split("stages that explain the change in server overhead:\n")[
        1
    ]
    listed = [line.split(":")[0].strip() for line in explained.split("\n\n")[0].splitlines()]
    assert listed == ["auth"], explained


def test_cli_exit_code_for_ci(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_bytes(orjson.dumps(fake_result(1, label="main")))
    b.write_bytes(orjson.dumps(fake_result(2, label="same")))
    c.write_bytes(orjson.dumps(fake_result(3, slowdown=1.10, label="slower")))

    same = perfkit_compare(str(a), str(b), "--fail-above", "5%")
    slower = perfkit_compare(str(a), str(c), "--fail-above", "5%")
    assert same.returncode == 0 and "| noise |" in same.stdout
    assert slower.returncode == 1 and "regression beyond 5%" in slower.stdout
    bad = perfkit_compare(str(a), "/nope.json")
    assert bad.returncode == 2 and "cannot read /nope.json" in bad.stderr


def test_a_sweep_file_compares_its_runs_and_names_the_stage_whose_cpu_changed(tmp_path: Path) -> None:
    baseline, candidate = fake_result(1), fake_result(2, auth_slowdown=1.3)
    sweep = {
        **baseline,
        "runs": [
            {**baseline, "target": "litellm", "litellm_version": "1.83.14", "workers": 1},
            {**candidate, "target": "litellm", "litellm_version": "1.103.0", "workers": 1},
        ],
    }
    path = tmp_path / "sweep.json"
    path.write_bytes(orjson.dumps(sweep))
    done = perfkit_compare(str(path))
    assert done.returncode == 0, done.stderr
    assert "litellm 1.103.0 (1 worker(s)) vs litellm 1.83.14 (1 worker(s))" in done.stdout
    assert "| stage auth (mean own CPU ms) |" in done.stdout
    cpu_lines = done.stdout.split("stages whose CPU per request changed (interval excludes 0):\n")[1].splitlines()
    assert cpu_lines[0].strip().startswith("auth: 1.645 -> 2.146 ms"), done.stdout
    single = tmp_path / "one.json"
    single.write_bytes(orjson.dumps(baseline))
    lone = perfkit_compare(str(single))
    assert lone.returncode == 2 and "holds one run" in lone.stderr
