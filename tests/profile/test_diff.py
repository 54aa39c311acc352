"""perfkit flamegraph --diff: which frames grew, per request, from known recordings and from real py-spy ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from litellm_perfkit._profile._diff import diff, load_recording

PERFKIT = [sys.executable, "-m", "litellm_perfkit._cli"]


def folded(path: Path, lines: dict[str, int]) -> Path:
    path.write_text("".join(f"{stack} {count}\n" for stack, count in lines.items()))
    return path


def test_known_growth_per_request_with_an_interval_from_repeats(tmp_path: Path) -> None:
    # 100 Hz: a sample is 10 ms. Each recording served 100 requests.
    a = [folded(tmp_path / f"a{n}.folded", {"main;auth;hash": 200 + n, "main;route": 100}) for n in range(3)]
    b = [
        folded(tmp_path / f"b{n}.folded", {"main;auth;hash": 400 - n, "main;route": 100, "main;auth;new_check": 50})
        for n in range(3)
    ]
    deltas, whole_a, whole_b = diff([load_recording(p, 100, 100) for p in a], [load_recording(p, 100, 100) for p in b])
    by_frame = {d.frame: d for d in deltas}
    assert (
        deltas[0].frame == "hash" and abs(deltas[0].self_delta - 19.8) < 1e-9
    )  # (400-1)-(200+1) samples, 10 ms, per request
    assert by_frame["auth"].self_delta == 0 and abs(by_frame["auth"].total_delta - 24.8) < 1e-9  # its children grew
    assert by_frame["new_check"].self_a == 0 and by_frame["new_check"].self_b == 5.0
    assert by_frame["route"].self_delta == 0
    assert abs(sum(d.share for d in deltas) - 1) < 1e-9 and abs(whole_b - whole_a - 24.8) < 1e-9
    assert abs(deltas[0].share - 19.8 / 24.8) < 1e-9
    low, high = deltas[0].interval or (0, 0)
    assert low < 19.8 < high


def test_the_cli_on_real_py_spy_recordings(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "def work():\n    sum(range(3000))\n"
        "def extra():\n    sum(range(6000))\n"
        "end = time.monotonic() + 3\n"
        "while time.monotonic() < end:\n    work()\n    if sys.argv[1] == 'b':\n        extra()\n"
    )
    (tmp_path / "load.py").write_text(script)
    recordings = []
    for side in ("a", "b"):
        out = tmp_path / f"{side}.speedscope.json"
        result = subprocess.run(
            [
                *PERFKIT,
                "flamegraph",
                "--duration",
                "2",
                "--sample-hz",
                "200",
                "--out",
                str(out),
                "--",
                sys.executable,
                str(tmp_path / "load.py"),
                side,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        recordings.append(out)
    result = subprocess.run(
        [
            *PERFKIT,
            "flamegraph",
            "--diff",
            str(recordings[0]),
            str(recordings[1]),
            "--sample-hz",
            "200",
            "--out",
            str(tmp_path / "diff.speedscope.json"),
            "--out",
            str(tmp_path / "diff.folded"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and not line.startswith("| frame")]
    # Both recordings last 2 s: the time B gave extra() is time work() lost, so the two lead, in either order.
    assert sorted(row.split(" (")[0] for row in rows[:2]) == ["| extra", "| work"], result.stdout
    extra = next(row for row in rows if row.startswith("| extra (load.py"))
    assert extra.split(" | ")[3].startswith("+"), result.stdout
    assert "work (load.py" in result.stdout and "share of what moved" in result.stdout
    document = orjson.loads((tmp_path / "diff.speedscope.json").read_bytes())
    grew = document["profiles"][0]
    names = [frame["name"] for frame in document["shared"]["frames"]]
    assert any("extra" in names[i] for sample in grew["samples"] for i in sample)
    assert all(len(line.split(" ")) >= 3 for line in (tmp_path / "diff.folded").read_text().splitlines())


def test_unreadable_recordings_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.folded"
    bad.write_text("main;auth notanumber\n")
    result = subprocess.run([*PERFKIT, "flamegraph", "--diff", str(bad), str(bad)], capture_output=True, text=True)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "folded stack" in result.stderr
    result = subprocess.run(
        [*PERFKIT, "flamegraph", "--diff", str(bad), str(bad), "--requests", "x"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "--requests" in result.stderr
