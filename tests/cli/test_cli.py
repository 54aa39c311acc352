"""Bad input gets one clear line and a non-zero exit code, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


def perfkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "litellm_perfkit._cli", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nope"], "invalid choice"),
        (["mock", "--ttft-ms", "-1"], "not a number >= 0"),
        (["mock", "--config", "/no/such/file.json"], "cannot read mock config"),
        (["load", "--url", "ftp://x"], "is not an http:// URL"),
        (["load", "--url", "http://127.0.0.1:1", "--warmup", "soon"], "--warmup"),
        (["load", "--url", "http://127.0.0.1:1", "--header", "nocolon"], "NAME:VALUE"),
        (["run"], "give the command to run after --"),
        (["run", "--", "no-such-command-xyz"], "command not found"),
        (["bench", "--workers", "x"], "worker counts"),
        (["bench", "--config", "/no/such.yaml"], "no such file"),
        (["bench", "--proxy-url", "http://x:1", "--litellm-version", "1.103.0"], "do not combine"),
    ],
)
def test_bad_input_is_one_line(args: list[str], says: str) -> None:
    result = perfkit(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.stderr


def test_every_command_has_help_with_examples() -> None:
    for command in ("mock", "load", "run", "bench"):
        result = perfkit(command, "--help")
        assert result.returncode == 0 and "examples:" in result.stdout


def test_load_against_nothing_fails_clearly() -> None:
    result = perfkit("load", "--url", "http://127.0.0.1:1", "--requests", "2", "--concurrency", "1", "--progress", "off")
    assert result.returncode == 1
    assert "every request failed: connection refused" in result.stderr
