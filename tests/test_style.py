"""The tree is formatted and linted by ruff (config in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from litellm_perfkit._bench._venvs import CACHE

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("check", [["format", "--check"], ["check"]], ids=["format", "lint"])
def test_ruff_passes(check: list[str]) -> None:
    # The cache lives outside the repo, like every other cache of the tests.
    command = [sys.executable, "-m", "ruff", *check, "--cache-dir", str(CACHE / "ruff"), "."]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
