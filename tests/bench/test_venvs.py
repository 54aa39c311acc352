"""The per-version LiteLLM venvs: what the install check sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from litellm_perfkit._bench._venvs import PACKAGE_ROOT, installed


def test_an_empty_venv_has_no_perfkit_even_when_checked_from_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run from the checkout, ``python -c`` would find litellm_perfkit in the
    # working directory and the venv would never get perfkit installed.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    monkeypatch.chdir(PACKAGE_ROOT)
    assert installed(tmp_path / "venv" / "bin" / "python") == (None, False)


def test_this_environment_has_perfkit_from_this_checkout_and_pyinstrument() -> None:
    assert installed(Path(sys.executable)) == (PACKAGE_ROOT, True)
