"""The per-version LiteLLM venvs: what the install check sees."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from litellm_perfkit._bench import _venvs
from litellm_perfkit._bench._venvs import PACKAGE_ROOT, installed, litellm_python


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


def test_two_threads_asking_for_one_venv_install_perfkit_into_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bench starts its proxies in threads; two pips in one venv removed each other's bin/perfkit.
    monkeypatch.setattr(_venvs, "CACHE", tmp_path)
    (tmp_path / "venvs" / f"litellm-1.0.0-py{sys.version_info.major}.{sys.version_info.minor}").mkdir(parents=True)
    (next((tmp_path / "venvs").iterdir()) / ".complete").write_text("1.0.0")
    has_perfkit, inside, most_inside, second_came = [False], [0], [0], threading.Event()
    monkeypatch.setattr(_venvs, "installed", lambda python: (PACKAGE_ROOT if has_perfkit[0] else None, True))

    def pip(python: Path, venv: Path, what: str, *args: str) -> None:
        inside[0] += 1
        most_inside[0] = max(most_inside[0], inside[0])
        if inside[0] == 2:
            second_came.set()
        second_came.wait(0.5)  # without the lock the other thread arrives here meanwhile
        has_perfkit[0] = True
        inside[0] -= 1

    monkeypatch.setattr(_venvs, "_pip", pip)
    threads = [threading.Thread(target=litellm_python, args=("1.0.0",)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most_inside[0] == 1 and has_perfkit[0]
