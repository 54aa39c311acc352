"""Bad input gets one clear line and a non-zero exit code, never a traceback."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from litellm_perfkit._cli._main import build_parser


def perfkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nope"], "invalid choice"),
        (["mock", "--ttft-ms", "-1"], "not a number >= 0"),
        (["mock", "--config", "/no/such/file.json"], "cannot read mock config"),
        (["load", "--url", "ftp://x"], "is not an http:// URL"),
        (["load", "--url", "http://127.0.0.1:1", "--warmup", "soon"], "--warmup"),
        (["load", "--url", "http://127.0.0.1:1", "--duration", "ten"], "is not a duration"),
        (["load", "--url", "http://127.0.0.1:1", "--jsonl", "x"], "--jsonl is now --records-out"),
        (["report", "a.json", "--html", "x.html"], "--html is now --out"),
        (["bench", "--warmup", "-3r"], "--warmup"),
        (["load", "--url", "http://127.0.0.1:1", "--header", "nocolon"], "NAME:VALUE"),
        (["run"], "give the command to run after --"),
        (["run", "--", "no-such-command-xyz"], "command not found"),
        (["bench", "--workers", "x"], "worker counts"),
        (["bench", "--config", "/no/such.yaml"], "no such file"),
        (["bench", "--proxy-url", "http://x:1", "--litellm-version", "1.103.0"], "do not combine"),
        (["bench", "--provider", "azure", "--config", "/etc/hostname"], "--provider sets the embedded"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--package", "my-gw"], "needs --proxy-command"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--min-change", "150%"], "--min-change"),
        (
            ["bisect", "--good", "1.0", "--bad", "2.0", "--min-samples", "5", "--max-samples", "2"],
            "is more than --max-samples",
        ),
        (["run", "--prometheus-port", "http", "--", "true"], "--prometheus-port"),
        (["run", "--record-rate", "0", "--", "true"], "neither 'all' nor a number of requests a second > 0"),
        (["bench", "--record-rate", "5"], "--record-rate sets what --perturbation measures"),
    ],
)
def test_bad_input_is_one_line(args: list[str], says: str) -> None:
    result = perfkit(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "env", "says"),
    [
        ((), "", "recording at most 10 requests a second per worker"),
        (("--record-rate", "2.5"), "", "recording at most 2.5 requests a second per worker"),
        ((), "bad", "recording at most 10 requests a second per worker"),  # the workers warn, and use the default
        (("--record-rate", "ALL"), "", None),
        ((), "all", None),
    ],
)
def test_perfkit_run_says_how_many_requests_it_records(flags: tuple[str, ...], env: str, says: str | None) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "run", *flags, "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PERFKIT_RECORD_RATE": env},
    )
    assert result.returncode == 0
    assert result.stderr.strip() == (
        ""
        if says is None
        else f"perfkit run: {says}, every request below that "
        "(--record-rate all: every request, at a cost: docs/overhead.md)"
    )


def test_every_command_has_help_with_examples() -> None:
    top = perfkit("--help")
    assert top.returncode == 0 and "Traceback" not in top.stderr, top.stderr
    commands = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)][
        0
    ].choices
    assert {"bench", "bisect", "compare", "report", "run", "load", "mock", "flamegraph"} <= set(commands)
    for command in commands:
        result = perfkit(command, "--help")
        assert command in top.stdout
        assert result.returncode == 0 and "examples:" in result.stdout, (command, result.stderr[-500:])


def test_every_flag_of_every_command_has_help() -> None:
    commands = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)][
        0
    ].choices
    missing = [
        f"perfkit {name} {action.option_strings or action.dest}"
        for name, parser in commands.items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("20", 20.0), ("20s", 20.0), ("500ms", 0.5), ("1.5m", 90.0), ("1h", 3600.0), ("0", 0.0)]
)
def test_every_duration_flag_takes_the_same_forms(text: str, seconds: float) -> None:
    from litellm_perfkit._cli._common import duration, warmup

    assert duration(text) == seconds
    assert warmup(text) == (seconds, 0)
    assert warmup("100r") == (0.0, 100)


def test_load_against_nothing_fails_clearly() -> None:
    result = perfkit(
        "load", "--url", "http://127.0.0.1:1", "--requests", "2", "--concurrency", "1", "--progress", "off"
    )
    assert result.returncode == 1
    assert "every request failed: connection refused" in result.stderr


def test_version_names_the_request_path_and_a_bad_speedups_value_is_one_warning() -> None:
    assert "(request path: C accelerator)" in perfkit("--version").stdout
    off = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PERFKIT_SPEEDUPS": "off"},
        timeout=60,
    )
    assert "(request path: pure Python, PERFKIT_SPEEDUPS=off)" in off.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PERFKIT_SPEEDUPS": "fast"},
        timeout=60,
    )
    assert bad.returncode == 0 and "C accelerator" in bad.stdout
    assert bad.stderr.strip() == "perfkit: PERFKIT_SPEEDUPS='fast' is not 'on' or 'off'; using 'on'"
