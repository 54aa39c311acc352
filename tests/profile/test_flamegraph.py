"""perfkit flamegraph: real py-spy on a real LiteLLM proxy under load."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy

PERFKIT = [sys.executable, "-m", "litellm_perfkit._cli"]


def perfkit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PERFKIT, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.integration
@pytest.mark.litellm
def test_py_spy_captures_a_litellm_proxy_with_two_workers_under_load(
    tmp_path: Path, validate_speedscope: Callable[[dict[str, Any]], None]
) -> None:
    pids: list[int] = []
    output = tmp_path / "proxy.speedscope.json"
    with (
        mock_process("--ttft-ms", "5", "--itl-ms", "1", "--chunks", "5") as upstream,
        litellm_proxy("1.103.0", upstream, tmp_path, workers=2, pids=pids) as proxy,
    ):
        load = subprocess.Popen(
            [
                *PERFKIT,
                "load",
                "--url",
                proxy,
                "--concurrency",
                "16",
                "--duration",
                "25",
                "--prompt-repeats",
                "5",
                "--progress",
                "off",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(3)
            result = perfkit(
                "flamegraph",
                "--pid",
                str(pids[0]),
                "--subprocesses",
                "--duration",
                "8",
                "--sample-hz",
                "50",
                "--out",
                str(output),
            )
        finally:
            load.terminate()
            load.wait(30)
    assert result.returncode == 0, result.stderr
    assert f"written: {output}" in result.stdout
    document = json.loads(output.read_text())
    validate_speedscope(document)  # against speedscope's own schema, from its npm package
    frames = document["shared"]["frames"]
    litellm_frames = [f for f in frames if "/litellm/" in f.get("file", "")]
    assert len(litellm_frames) > 20, len(litellm_frames)
    assert any("proxy" in f["file"] for f in litellm_frames)
    # --subprocesses: the workers' stacks are there, not only the supervisor's.
    processes = {p["name"].split()[1] for p in document["profiles"] if p["name"].startswith("Process")}
    assert len(processes) >= 2, [p["name"] for p in document["profiles"]]


def test_a_bad_pid_is_one_line_and_exit_2() -> None:
    result = perfkit("flamegraph", "--pid", "99999999")
    assert result.returncode == 2
    assert result.stderr.strip() == "perfkit flamegraph: error: --pid 99999999: no such process"
    result = perfkit("flamegraph", "--pid", "abc")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_ptrace_refused_says_how_to_fix_it(tmp_path: Path) -> None:
    """A target owned by another user, and no CAP_SYS_PTRACE: py-spy is refused."""
    setpriv = "/usr/bin/setpriv"
    assert Path(setpriv).exists(), "setpriv (util-linux) is needed to drop CAP_SYS_PTRACE for this test"
    python = "/usr/bin/python3"  # the test's own python lives under /root, which the other user may not read
    assert Path(python).exists(), "the system python3 is needed to run a target as another user"
    target = subprocess.Popen(
        [
            setpriv,
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            python,
            "-c",
            "import time\nwhile True: time.sleep(0.01)",
        ],
        cwd="/",
    )
    try:
        time.sleep(1.0)
        assert target.poll() is None, "the target did not start"
        command = [
            setpriv,
            "--inh-caps=-sys_ptrace",
            "--bounding-set=-sys_ptrace",
            *PERFKIT,
            "flamegraph",
            "--pid",
            str(target.pid),
            "--duration",
            "1",
            "--out",
            str(tmp_path / "x.json"),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        target.kill()
        target.wait()
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "ptrace" in lines[0] and "CAP_SYS_PTRACE" in lines[0] and "ptrace_scope" in lines[0], (
        result.stderr
    )
