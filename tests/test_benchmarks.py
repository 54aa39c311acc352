"""Every script in benchmarks/ runs at smoke size (seconds, not minutes) and
prints its table: a stale flag, a renamed module or a private attribute that
moved fails here, not when someone next tries to reproduce a figure.

Each case runs one script as ``python -m benchmarks.NAME`` with small
counts and checks the rows it printed, not only its exit code. The figures
themselves mean nothing at this size and are not checked. Jaeger and the
LiteLLM venv come from the cache, as for the other integration tests;
mock_throughput and driver_throughput also need wrk (Debian's package), and
fail saying so without it. All cases together use about 240 s of CPU, 110 of
them the two LiteLLM apps litellm_recording_cost counts under valgrind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from litellm_perfkit._bench._venvs import CACHE

ROOT = Path(__file__).resolve().parents[1]
# The suite's own settings (tests/conftest.py) are not the benchmarks': they
# set their record rate themselves, and export on perfkit's default schedule.
SUITE_ONLY = ("PERFKIT_RECORD_RATE", "OTEL_BSP_SCHEDULE_DELAY")


def benchmark_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the suite's own settings, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k not in SUITE_ONLY}, **(extra or {})}


def run(module: str, *args: str, env: dict[str, str] | None = None) -> str:
    """``python -m benchmarks.MODULE ARGS`` from the repo root; its stdout, once it exited 0
    without an internal error of perfkit's (how a private attribute that moved shows)."""
    command = [sys.executable, "-m", f"benchmarks.{module}", *args]
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env=benchmark_env(env), capture_output=True, text=True, timeout=900)
    took = time.monotonic() - started
    said = f"{' '.join(command[2:])} ({took:.0f} s) exited {result.returncode}:\n{result.stderr[-4000:]}"
    assert result.returncode == 0, said
    assert "perfkit: internal error" not in result.stdout + result.stderr, said
    return result.stdout


def table(text: str, header: str) -> list[list[str]]:
    """The body rows (cells) of the Markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"no table starting {header!r} in:\n{text}"
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def number(cell: str) -> float:
    """The first number in a cell: ``12,645``, ``+1.5 [...]``, ``60.59 ms (...)``."""
    match = re.search(r"[-+]?[\d,]*\.?\d+", cell)
    assert match, cell
    return float(match.group().replace(",", ""))


def line(text: str, pattern: str) -> re.Match[str]:
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return match


# -- in-process: the middleware's own benchmarks ---------------------------------


def stage_profile_overhead(tmp_path: Path) -> None:
    out = run("stage_profile_overhead", "--requests", "200", "--repeats", "1")
    rows = table(out, "| workload | per-stage profiling |")
    variants = ("off", "off again", "on 5 ms", "on 1 ms")
    assert [r[:2] for r in rows] == [[w, v] for w in ("json", "sse-20") for v in variants], out
    assert all(number(r[2]) > 0 for r in rows), out


def staged_calls(tmp_path: Path) -> None:
    out = run("staged_calls", "--rounds", "3", "--calls", "20")
    rows = table(out, "| kind | request |")
    kinds = ["async block", "sync block", "async sum", "sync sum"]
    assert [r[:2] for r in rows] == [[k, w] for k in kinds for w in ("recorded", "passed through")], out
    assert all(number(cell) > 0 for r in rows for cell in r[2:6]), out


def middleware_ablation(tmp_path: Path) -> None:
    out = run("middleware_ablation", "--rounds", "5", "--batch", "10")
    rows = table(out, "| variant | µs per request |")
    names = ["bare", "perfkit", "no headers", "no stages", "raw receive", "python path"]
    assert [r[0] for r in rows] == names, out
    assert all(number(r[1]) > 0 for r in rows), out


# -- real processes: Jaeger, valgrind, the mock and other load tools ---------------


def middleware_overhead(tmp_path: Path) -> None:
    out = run("middleware_overhead", "--rounds", "3", "--batch", "5", "--host-provider", "on")
    rows = table(out, "| workload | variant |")
    from benchmarks.middleware_overhead import VARIANTS, WORKLOADS  # a row for each pair it declares

    assert [r[:2] for r in rows] == [[w, v] for w, _ in WORKLOADS for v in VARIANTS], out
    assert all(number(r[2]) > 0 for r in rows), out
    # The threads that export (perfkit's in thread mode, OTel's) did work; the OTel rows compare with perfkit's.
    assert all(number(r[4]) > 0 for r in rows if r[1] in ("perfkit-thread", "otel-asgi")), out
    assert all(r[8] for r in rows if r[1].startswith("otel")), out
    passthrough = table(out, "| workload | variant | µs |")  # the unrecorded path's own table
    names = ["bare", "passthrough-untallied", "passthrough-wrapped", "passthrough-tallied", "passthrough-tallied-py"]
    assert [r[:2] for r in passthrough] == [[w, v] for w, _ in WORKLOADS for v in names], out
    assert all(r[4] for r in passthrough if r[1] not in ("bare", "passthrough-untallied")), out


def middleware_overhead_instructions(tmp_path: Path) -> None:
    # The fewest valgrind runs (two sizes of two workloads): each takes about 10 s of CPU.
    out = run("middleware_overhead", "--measure", "instructions", "--requests", "2", "--variants", "bare")
    rows = table(out, "| workload | variant | instructions |")
    assert [r[:2] for r in rows] == [["json", "bare"], ["sse-20", "bare"]], out
    assert all(number(r[2]) > 0 for r in rows), out


def allocations(tmp_path: Path) -> None:
    # One workload, the fewest requests: four callgrind runs, the recorded one with its agent.
    out = run("allocations", "--requests", "2", "--workloads", "json", "--variants", "perfkit-process")
    rows = table(out, "| workload | variant | request path |")
    assert [r[:2] for r in rows] == [["json", "bare"], ["json", "perfkit-process"]], out
    assert number(rows[0][2]) > 0 and number(rows[1][4]) > 0, out  # the app's requests, and the agent's work


def mock_throughput(tmp_path: Path) -> None:
    out = run("mock_throughput", "--duration", "1", "--repeats", "1")
    rows = table(out, "| measurement | tool |")
    assert [r[1] for r in rows] == ["wrk -c64", "wrk -c64", "asyncio client"], out
    assert all(number(r[2]) > 0 for r in rows), out


def driver_throughput(tmp_path: Path) -> None:
    # Locust needs about a second to start its users, more on a loaded machine (a .ci/run saw no request
    # in 2 s): 5 s gives it requests to count.
    out = run("driver_throughput", "--duration", "5", "--repeats", "1")
    rows = table(out, "| tool | req/s |")
    assert [r[0] for r in rows] == ["wrk", "perfkit load", "locust FastHttpUser", "locust + perfkit user"], out
    assert all(number(r[1]) > 0 for r in rows), out
    line(out, r"^Targets: perfkit >= 0\.4x wrk \(here [\d.]+x\), >= 2x Locust FastHttpUser \(here [\d.]+x\)$")


# -- the real LiteLLM proxy ---------------------------------------------------------


def litellm_overhead(tmp_path: Path) -> None:
    # _gcprobe loaded into every proxy (--collector), capturing what each export agent reads.
    served = tmp_path / "served"
    out = run(
        "litellm_overhead",
        *("--pairs", "1", "--rounds", "1", "--warmup", "1", "--requests", "32", "--collector"),
        *("--modes", "plain,perfkit-default,perfkit-agent-apart"),  # the agent moved: it exits 1 if none is found
        env={"PERFKIT_BENCH_CAPTURE": str(served)},
    )
    assert number(line(out, r"^spans stored in Jaeger .*: (\d+)$").group(1)) > 0, out
    rows = table(out, "| mode | CPU ms per request (worker) |")
    assert [r[0] for r in rows] == ["plain", "perfkit-default", "perfkit-agent-apart"], out
    assert all(number(r[3]) > 0 and number(r[4]) > 0 for r in rows), out
    assert rows[1][5] and rows[1][6], out  # the ratios to plain
    line(out, r"^- perfkit-default: [\d.]+$")
    line(out, r"^- plain: [\d.]+ \(their pause, median of pairs: [\d.]+ ms per request\)$")
    line(out, r"^- perfkit-default against plain, all pairs: \d+ in \d+ requests against \d+ in \d+; rate ratio ")
    # The records the agent read, replayed by agent_cost (its second documented source).
    captured = sorted(tmp_path.glob("served.*"))
    assert captured and all(f.stat().st_size > 0 for f in captured), captured
    replayed = run("agent_cost", str(captured[0]), "--repeats", "1")
    line(replayed, r"^served\.\d+: \d+ records in batches of 16, median of 1 passes:$")
    line(replayed, r"^  span form protobuf: [\d.]+ us CPU per record")


def litellm_gc_pauses(tmp_path: Path) -> None:
    out = run("litellm_gc_pauses", "--duration", "2", "--warmup", "2", "--concurrency", "8")
    count = line(out, r"^LiteLLM [\d.]+, 8 users, [\d.]+ req/s, (\d+) requests \(warm-up included\)$")
    assert int(count.group(1)) > 0, out
    for start in ("requests with a pause inside them: ", "requests with >= 100 ms of pause: ", "slowest 5%: "):
        line(out, "^" + re.escape(start))
    line(out, r"^pause time / summed request time: [\d.]+%$")


def litellm_diff_profile(tmp_path: Path) -> None:
    out = run("litellm_diff_profile", "--repeats", "1", "--duration", "1", "--warmup", "2", "--out", str(tmp_path))
    line(out, r"^A [\d.]+ ms per request, B [\d.]+ ms per request")
    rows = table(out, "| code | plain | perfkit | change |")
    assert len(rows) >= 2 and rows[-1][0] == "all" and number(rows[-1][1]) > 0, out
    # py-spy saw perfkit's frames on the perfkit side only.
    folded = (tmp_path / "diff.folded").read_text()
    assert "litellm_perfkit" in folded, folded[:2000]
    assert (tmp_path / "plain-0.txt").stat().st_size > 0 and (tmp_path / "perfkit-0.txt").stat().st_size > 0


def litellm_recording_cost(tmp_path: Path) -> None:
    out = run("litellm_recording_cost", "--rounds", "3", "--warmup", "1", "--batch", "4")
    line(
        out, r"^json: passed through [\d.]+ ms CPU per request, recorded [\d.]+; recording adds -?[\d.]+ us per request"
    )


def litellm_recording_cost_against_plain(tmp_path: Path) -> None:
    out = run(
        "litellm_recording_cost",
        *("--against-plain", "--modes", "passed", "--sets", "1", "--rounds", "2", "--warmup", "1", "--batch", "4"),
    )
    line(out, r"^json: set 1: plain [\d.]+ ms CPU per request, passed [\d.]+ \([\d.]+x, 95% interval ")
    line(out, r"^json: median over 1 sets, against plain: passed [\d.]+x")


def litellm_recording_cost_instructions(tmp_path: Path) -> None:
    out = run(
        "litellm_recording_cost",
        *("--measure", "instructions", "--rounds", "1", "--warmup", "1", "--batch", "2", "--settle", "0.2"),
        *("--allocation-callers", "4", "--keep", str(tmp_path / "kept")),
    )
    assert {p.name for p in (tmp_path / "kept").iterdir()} == {"callgrind.json.passed", "callgrind.json.recorded"}
    parts = line(
        out,
        r"^json: instructions per request \(callgrind, 2 requests each, python [\d.]+\): passed through ([\d,]+), recorded ([\d,]+), recording adds ",
    )
    assert all(int(part.replace(",", "")) > 1_000_000 for part in parts.groups()), out
    rows = table(out, "| where | instructions added per request |")
    assert any(row[0].startswith("perfkit's C: ") for row in rows), out
    assert rows[-1][0].startswith("- of which ") and "every other function" in out, out
    allocated = table(out, "| Python allocations per request | passed through | recorded | added |")
    assert [row[0] for row in allocated] == ["objects (small-object allocator calls)", "of which gc-tracked"], out
    assert all(float(row[1].replace(",", "")) > 100 for row in allocated), out
    chains = table(out, "| objects added per request | allocated by (callee < caller < ...) |")
    assert 0 < len(chains) <= 30 and all(" < " in row[1] for row in chains), out


def agent_cost(tmp_path: Path) -> None:
    # Records a real proxy made, captured in-process (its first documented source).
    run(
        "litellm_recording_cost",
        *("--rounds", "2", "--warmup", "1", "--batch", "4", "--capture", str(tmp_path / "records.bin")),
    )
    records = tmp_path / "records.json.bin"
    out = run("agent_cost", str(records), "--repeats", "2", "--batch", "4", "--span-forms", "tuples,protobuf")
    line(out, r"^records\.json\.bin: 8 records in batches of 4, median of 2 passes:$")
    for form in ("tuples", "protobuf"):
        parts = line(
            out,
            rf"^  span form {form}: [\d.]+ us CPU per record "
            r"\(decode ([\d.]+), handle ([\d.]+), encode ([\d.]+), snapshot ([\d.]+)\)$",
        )
        assert all(float(part) > 0 for part in parts.groups()[:3]), out
    line(out, r"^  protobuf / tuples, median of the 2 pairs: [\d.]+ \(range [\d.]+-[\d.]+\)$")


def bench_sigterm(tmp_path: Path) -> None:
    # One moment (the first stage: start-up); tests/bench/test_stop_moments.py covers one per stage.
    out = run("bench_sigterm", "--moments", "1")
    line(out, r"^  0 .* exit .* clean in +[\d.]+ s, \d+ started, left 0$")
    line(out, r"^1 moments, 1 reached; max time to clean [\d.]+ s; 0 over 10 s or with a process left$")


def sigterm_from_shell(tmp_path: Path) -> None:
    # One moment, 3 s after the bench starts (its direct phase), the venv cached; the script
    # runs the perfkit on PATH, this interpreter's.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    script = ["bash", "benchmarks/sigterm_from_shell.sh", str(CACHE), "-", "3", "--litellm-version", "1.103.0"]
    result = subprocess.run(
        script, cwd=ROOT, env=benchmark_env({"PATH": path}), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and re.search(r"^PASS exit 143 ", result.stdout, re.M), result.stdout + result.stderr


def weighted_sample(tmp_path: Path) -> None:
    rows = table(run("weighted_sample", "--seeds", "2"), "| scenario |")
    assert [(row[0], row[4]) for row in rows] == [
        (scenario, q) for scenario in ("steady", "bursty", "ramp", "offsets") for q in ("p50", "p95")
    ]


def fakegw_pair_noise(tmp_path: Path) -> None:
    out = run("fakegw_pair_noise", "--pairs", "2", "--duration", "1", "--key-bytes", "100000", "--route-bytes", "0")
    rows = table(out, "| pair |")
    assert [r[0] for r in rows] == ["1", "2"] and all(number(r[2]) > 0 and number(r[3]) > 0 for r in rows), out
    line(out, r"^pair noise \(spread of one pair's log ratio\): [\d.]+% over 2 pairs")


def pair_order(tmp_path: Path) -> None:
    out = run("pair_order", "--fakegw", "--pairs", "2", "--duration", "1")
    rows = table(out, "| pair | scheme |")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("1", "start", "lower", "lower"),
        ("1", "send", "lower", "lower"),
        ("1", "rounds", "lower", "alternating"),
        ("2", "start", "upper", "upper"),
        ("2", "send", "lower", "upper"),
        ("2", "rounds", "upper", "alternating"),
    ], out
    assert [r[0] for r in table(out, "| scheme | grouped by |")] == ["start", "send", "rounds"], out


def soak(tmp_path: Path) -> None:
    # The small app only: --target litellm's two workers alone take minutes to start on this machine,
    # and its 2,000-request smoke run took 6 minutes (docs/reliability.md quotes its full run).
    out = run("soak", "--requests", "300", "--step", "100")  # two samples after the first step: a slope
    rows = table(out, "| backend | requests |")
    assert [r[:3:2] for r in rows] == [["down", "app"], ["hung", "app"]] and all(number(r[1]) >= 300 for r in rows)
    assert all(re.fullmatch(r"[-+][\d.]+ ± ([\d.]+|nan) MiB", r[4]) for r in rows), out  # the slope and its noise
    line(out, r"^failed at the client \(the cut streams among them\): .+$")
    served = line(out, r"^sent by perfkit load: [\d,]+; served by the app \(its own count\): ([\d,]+)$").group(1)
    counted = line(out, r'^perfkit\'s counts at exit: \{"requests":(\d+),"recorded":\d+,').group(1)
    assert number(served) == number(counted), out
    line(out, r"^processes left 10 s after SIGTERM: 0$")


# Each check is named for the script it runs; a script's second check adds a suffix.
QUICK = (stage_profile_overhead, middleware_ablation, weighted_sample, staged_calls)
REAL = (
    middleware_overhead,
    middleware_overhead_instructions,
    allocations,
    mock_throughput,
    driver_throughput,
    soak,
    fakegw_pair_noise,
    pair_order,
)
LITELLM = (
    litellm_overhead,
    litellm_gc_pauses,
    litellm_diff_profile,
    litellm_recording_cost,
    litellm_recording_cost_against_plain,
    litellm_recording_cost_instructions,
    agent_cost,
    bench_sigterm,
    sigterm_from_shell,
)
CASES = [
    *(pytest.param(check, id=check.__name__) for check in QUICK),
    *(pytest.param(check, marks=pytest.mark.integration, id=check.__name__) for check in REAL),
    *(
        pytest.param(check, marks=(pytest.mark.integration, pytest.mark.litellm), id=check.__name__)
        for check in LITELLM
    ),
]


@pytest.mark.parametrize("check", CASES)
def test_runs_at_smoke_size(check: Callable[[Path], None], tmp_path: Path) -> None:
    check(tmp_path)


def test_every_script_has_a_case() -> None:
    scripts = {p.stem for p in (*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "benchmarks").glob("*.sh"))}
    scripts = {stem for stem in scripts if not stem.startswith("_")}
    checks = [check.__name__ for check in (*QUICK, *REAL, *LITELLM)]

    def runs(check: str, script: str) -> bool:
        return check == script or check.startswith(f"{script}_")

    assert {script for script in scripts if any(runs(check, script) for check in checks)} == scripts
    assert all(any(runs(check, script) for script in scripts) for check in checks), checks


def test_instruction_runs_print_each_run_and_their_range(capsys: pytest.CaptureFixture[str]) -> None:
    """``--runs N``'s table (a pair of valgrind runs of LiteLLM is two minutes: the smoke run above makes one)."""
    from benchmarks._callgrind import runs_spread

    runs_spread(
        "json",
        [{"instructions": 250_000, "objects": 118.1, "gc_tracked": 70.3}] * 2
        + [{"instructions": 290_500, "objects": 114.4, "gc_tracked": 66.1}],
    )
    rows = table(capsys.readouterr().out, "| | run 1 | run 2 | run 3 | range |")
    assert rows == [
        ["instructions", "+250,000", "+250,000", "+290,500", "+250,000 to +290,500"],
        ["objects", "+118.1", "+118.1", "+114.4", "+114.4 to +118.1"],
        ["of which gc-tracked", "+70.3", "+70.3", "+66.1", "+66.1 to +70.3"],
    ]
