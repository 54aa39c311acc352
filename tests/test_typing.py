"""The package type-checks under ``mypy --strict`` (config in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from litellm_perfkit._bench._venvs import CACHE

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_is_strict_clean() -> None:
    # The cache lives outside the repo, like every other cache of the tests.
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(CACHE / "mypy"), "litellm_perfkit"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_c_module_matches_its_stub() -> None:
    """_core/_speedups.pyi names what the built C module exports, no more, no less (mypy's stubtest).
    Not checked: PEP 800 disjoint bases, which older mypy versions cannot read in a stub."""
    command = [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", "pyproject.toml", "--ignore-disjoint-bases"]
    result = subprocess.run(
        [*command, "litellm_perfkit._core._speedups"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
