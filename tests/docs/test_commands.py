"""Every command the docs cite runs today: its command or module exists, and so do its flags."""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys

import pytest

from litellm_perfkit._cli._main import build_parser, command_parsers
from tests.docs.commands import ROOT, Command, cited

COMMANDS = cited()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


PARSER = build_parser()
SUBCOMMANDS = command_parsers()


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


@functools.cache
def _benchmark_options(module: str) -> set[str]:
    """The long options in `python -m benchmarks.MODULE --help`."""
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, f"python -m benchmarks.{module} --help failed:\n{result.stderr[-2000:]}"
    return set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", result.stdout))


def test_the_docs_cite_both_kinds_of_command() -> None:
    assert sum(c.module is not None for c in COMMANDS) >= 20 and sum(c.module is None for c in COMMANDS) >= 50


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.module is None], ids=lambda c: f"{c.page}:{c.text[:60]}")
def test_every_perfkit_command_cited_has_its_subcommand_and_flags(command: Command) -> None:
    parser = PARSER
    if command.subcommand is not None:
        assert command.subcommand in SUBCOMMANDS, f"{command.page} cites `perfkit {command.subcommand}`, which is gone"
        parser = SUBCOMMANDS[command.subcommand]
    unknown = [flag for flag in command.flags if flag not in _options(parser)]
    assert not unknown, (
        f"{command.page} cites {unknown} in `{command.text}`: not in perfkit {command.subcommand} --help"
    )


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.module], ids=lambda c: f"{c.page}:{c.text[:70]}")
def test_every_benchmark_cited_exists_with_its_flags(command: Command) -> None:
    assert command.module is not None
    assert (ROOT / "benchmarks" / f"{command.module}.py").is_file(), (
        f"{command.page} cites benchmarks.{command.module}, which does not exist"
    )
    unknown = [flag for flag in command.flags if flag not in _benchmark_options(command.module)]
    assert not unknown, f"{command.page} cites {unknown} in `{command.text}`: not in its --help"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.module == "litellm_overhead"], ids=lambda c: c.text[:80])
def test_every_litellm_overhead_mode_cited_is_one_it_takes(command: Command) -> None:
    from benchmarks.litellm_overhead import mode_settings

    for mode in (command.value("--modes") or "").split(","):
        if mode and not re.fullmatch(r"[A-Z]+", mode):  # a placeholder (MODE) stands for any
            try:
                mode_settings(mode, ())
            except SystemExit as exc:
                pytest.fail(f"{command.page}: `{command.text}`: {exc}")


def test_perfkit_run_help_quotes_no_measured_figure_and_points_to_the_docs() -> None:
    text = SUBCOMMANDS["run"].format_help()
    figures = re.findall(r"\d+(?:\.\d+)?x\b|\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?%", text)
    assert not figures, f"perfkit run --help quotes measured figures {figures}: they belong in docs/overhead.md"
    assert "docs/overhead.md" in text


@pytest.mark.parametrize(
    "command",
    [c for c in COMMANDS if c.module in ("middleware_overhead", "allocations") and c.value("--variants")],
    ids=lambda c: c.text[:80],
)
def test_every_middleware_variant_cited_is_one_it_declares(command: Command) -> None:
    from benchmarks.middleware_overhead import VARIANTS

    unknown = [name for name in (command.value("--variants") or "").split(",") if name and name not in VARIANTS]
    assert not unknown, (
        f"{command.page}: `{command.text}` names variants {unknown}, not in middleware_overhead.VARIANTS"
    )
