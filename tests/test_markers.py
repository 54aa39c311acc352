"""The guard that keeps the quick run quick (tests/support/markers.py, tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from litellm_perfkit._bench._venvs import CACHE
from tests.conftest import pytest_collection_modifyitems
from tests.support.markers import UnmarkedExternalProcess, external_tool

VENV_PYTHON = CACHE / "venvs" / "litellm-1.103.0-py3.11" / "bin" / "python"


@pytest.mark.parametrize(
    ("command", "tool"),
    [
        ([str(VENV_PYTHON), "-c", "pass"], "perfkit's cache"),
        ([str(CACHE / "jaeger-v1.76.0" / "jaeger"), "--config", "x"], "Jaeger"),
        (["/usr/bin/chromium", "--headless", "--screenshot"], "a browser"),
        (["taskset", "-c", "0", "/opt/venv/bin/litellm", "--config", "c.yaml"], "a LiteLLM proxy"),
        ("npm install speedscope", "npm"),
        (["/root/.pyenv/versions/3.12.1/bin/python3.12", "-c", "pass"], "another Python"),
        ([sys.executable, "-m", "litellm_perfkit._cli", "mock", "--port", "1"], None),
        (["taskset", "-c", "0", sys.executable, "-m", "tests.support.cpu_gateway"], None),
        ([sys.executable, "-m", "mypy", "--cache-dir", str(CACHE / "mypy"), "litellm_perfkit"], None),
        ("py-spy record --pid 1", None),
    ],
)
def test_outside_programs_are_named_and_perfkits_own_are_not(command: Any, tool: str | None) -> None:
    named = external_tool(command)
    assert (named is None) if tool is None else (named is not None and tool in named), named


def test_this_interpreter_may_live_in_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/test_pythons.py runs the unit tests under interpreters kept in perfkit's cache."""
    from tests.support import markers

    monkeypatch.setattr(markers, "_THIS_PYTHON_PATH", CACHE / "pythons" / "py3.10" / "bin" / "python")
    assert external_tool([str(CACHE / "pythons" / "py3.10" / "bin" / "python"), "-m", "litellm_perfkit._cli"]) is None
    assert external_tool([str(VENV_PYTHON), "-c", "pass"]) is not None


def test_an_unmarked_test_that_starts_a_litellm_venv_fails_naming_the_marker() -> None:
    with pytest.raises(UnmarkedExternalProcess, match=r"test_markers\.py.*mark it @pytest\.mark\.integration"):
        subprocess.run([str(VENV_PYTHON), "-c", "pass"], capture_output=True)


@pytest.mark.integration
def test_a_marked_test_may_start_one() -> None:
    """Refused by the guard it would be UnmarkedExternalProcess; this is the operating system's answer."""
    with pytest.raises(OSError):
        subprocess.run([str(Path("/nonexistent") / "jaeger")], capture_output=True)


def test_asking_for_the_jaeger_fixture_without_the_marker_stops_the_run() -> None:
    def item(marked: bool) -> Any:
        return SimpleNamespace(
            nodeid=f"tests/x.py::test_{marked}",
            fixturenames=["jaeger"],
            get_closest_marker=lambda name: object() if marked and name == "integration" else None,
        )

    pytest_collection_modifyitems([item(True)])  # marked: fine
    with pytest.raises(pytest.UsageError, match="test_False"):
        pytest_collection_modifyitems([item(True), item(False)])
