"""Every supported CPython: the core, wire, mock, export and load unit tests.

``requires-python`` says >=3.10. This file runs those tests (each core case
on the C and the pure-Python backend, as everywhere) under the other CPython
versions found on the machine, each in a venv cached under the cache
directory and refreshed with this checkout. A version that is not installed
fails: the suite does not pass by skipping it.

The versions run side by side, all at once (their installs one at a time:
each builds the C accelerator into this checkout), beside the rest of the
suite's first part: a run waits on sockets and child processes for about
half its time (65 s of wall time, 34 s of CPU under 3.11), the unit part
passes beside a CPU hog at load averages up to 7.7 (README), and its one
bound of a few milliseconds is on a step's thread CPU, which preemption
does not move. The unit part binds no fixed port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from litellm_perfkit._bench._venvs import CACHE

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("3.10", "3.11", "3.12", "3.13")
OTHERS = [v for v in VERSIONS if v != f"{sys.version_info.major}.{sys.version_info.minor}"]
PORTABLE = ["tests/core", "tests/wire", "tests/mock", "tests/export", "tests/load", "tests/test_imports.py"]
_INSTALLING = threading.Lock()  # one pip at a time: each writes the checkout's egg-info and its own C module


def _runs(python: Path, version: str) -> bool:
    """Whether ``python`` starts and is ``version`` (a pyenv shim may exist and refuse to run)."""
    check = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
    )
    return check.returncode == 0 and check.stdout.strip() == version


def interpreter(version: str) -> Path:
    """pyenv's newest <version>.x, else python<version> on PATH."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(
        root.glob(f"{version}.*/bin/python"), key=lambda p: [int(x) for x in p.parts[-3].split(".")[:3] if x.isdigit()]
    )
    on_path = shutil.which(f"python{version}")
    for python in [*reversed(candidates), *([Path(on_path)] if on_path else [])]:
        if _runs(python, version):
            return python
    raise AssertionError(
        f"CPython {version} is not installed (looked in {root} and for python{version} on PATH): "
        f"install it (e.g. pyenv install {version}) to test every supported version"
    )


def portable_tests(version: str, basetemp: Path) -> subprocess.CompletedProcess[str]:
    """The unit part of PORTABLE under CPython ``version``, in its venv refreshed with this checkout."""
    python = interpreter(version)
    venv = CACHE / "pythons" / f"py{version}"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    with _INSTALLING:
        if not (venv / "bin" / "python").exists():
            subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
        installed = subprocess.run([*pip, "-e", f"{ROOT}[test]"], capture_output=True, text=True, timeout=1200)
    assert installed.returncode == 0, installed.stderr[-3000:]
    command = [
        str(venv / "bin" / "python"),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        # Its own temporary directories: pytest's clean-up of old ones never meets a run beside it.
        "--basetemp",
        str(basetemp),
        "-m",
        # The unit part: the same code paths; Jaeger and the millisecond timing
        # checks run once, under the interpreter running the suite.
        "not litellm and not integration",
        *PORTABLE,
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Every other version's run, all at once; each test waits for its own."""
    with ThreadPoolExecutor(len(OTHERS)) as pool:
        yield {v: pool.submit(portable_tests, v, tmp_path_factory.mktemp(f"py{v}")) for v in OTHERS}


@pytest.mark.integration
@pytest.mark.parametrize("version", OTHERS)
def test_the_portable_tests_pass_on(version: str, runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    result = runs[version].result()
    assert result.returncode == 0, f"CPython {version}:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
    assert " passed" in result.stdout and " failed" not in result.stdout
