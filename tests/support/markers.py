"""The outside programs a test may start only under the ``integration`` marker.

A quick run (``pytest -m "not integration and not litellm"``) must not start
a LiteLLM proxy, Jaeger, a browser or another interpreter. ``tests/conftest.py``
fails an unmarked test that starts one (through ``subprocess``, which asyncio's
subprocesses use too) or asks for the ``jaeger`` fixture. The processes perfkit
starts itself (its export agent, ``perfkit mock``, the test gateways run with
this interpreter) and the tools the ``test`` extra installs (py-spy, mypy,
ruff) are part of the unit suite.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from litellm_perfkit._bench._venvs import CACHE

__all__ = ["EXTERNAL_MARKERS", "external_tool", "forbidding_external_tools"]

EXTERNAL_MARKERS = ("integration", "litellm")

# program name -> what it is
_TOOLS = {
    "litellm": "a LiteLLM proxy",
    "jaeger": "Jaeger",
    "prometheus": "Prometheus",
    "chromium": "a browser",
    "chromium-browser": "a browser",
    "google-chrome": "a browser",
    "npm": "npm",
    "npx": "npm",
    "node": "node",
    "go": "Go",
    "apt-get": "apt-get",
    "build_jaeger.sh": "Jaeger's build",
    "initdb": "PostgreSQL",
    "psql": "PostgreSQL",
    "runuser": "PostgreSQL (as its user)",
    "redis-server": "Redis",
}
_WRAPPERS = {"taskset", "nice", "env", "timeout", "setsid", "stdbuf"}
_CACHES = (CACHE.resolve(), (Path.home() / ".cache" / "litellm_perfkit").resolve())
_THIS_PYTHON_PATH = Path(os.path.abspath(sys.executable))
_THIS_PYTHON = {Path(sys.executable).resolve(), Path(sys.executable).absolute()}


def _words(args: Any) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        return shlex.split(text) if " " in text else [text]
    return [os.fsdecode(arg) for arg in args]


def _program(words: Sequence[str]) -> str | None:
    """The program a command runs, past wrappers such as ``taskset -c 0``."""
    for word in words:
        if Path(word).name in _WRAPPERS or word.startswith("-") or word.replace(",", "").isdigit():
            continue
        return word
    return None


def external_tool(args: Any) -> str | None:
    """What outside program the command ``args`` (as ``subprocess`` takes it) starts, or None."""
    words: Sequence[str] = _words(args)
    for word in words:
        if Path(word).name in _TOOLS:
            return f"{_TOOLS[Path(word).name]} ({word})"
    program = _program(words)
    if program is None or not Path(program).is_absolute():
        return None
    path = Path(program)
    if Path(os.path.abspath(path)) == _THIS_PYTHON_PATH:  # this interpreter, wherever it lives (a cached venv too)
        return None
    # Not resolved only: a venv's python is a link to the interpreter it was made from.
    if any(cache in Path(os.path.abspath(path)).parents for cache in _CACHES):
        return f"a program from perfkit's cache of LiteLLM venvs and tools ({program})"
    if path.name.startswith("python") and path.absolute() not in _THIS_PYTHON and path.resolve() not in _THIS_PYTHON:
        return f"another Python interpreter ({program})"
    return None


@contextmanager
def forbidding_external_tools(test: str) -> Iterator[None]:
    """``subprocess.Popen`` refuses, naming the marker, to start an outside program while ``test`` runs."""
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        tool = external_tool(args)
        if tool is not None:
            raise UnmarkedExternalProcess(
                f"{test} starts {tool}: mark it @pytest.mark.integration (and litellm for a LiteLLM venv)"
            )
        original(self, args, *rest, **options)

    subprocess.Popen.__init__ = guarded  # type: ignore[assignment,method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]


class UnmarkedExternalProcess(RuntimeError):
    pass
