"""Both implementations of the request path, for tests that run each in one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from litellm_perfkit._core._backend import Backend, BackendName, backend

NAMES: tuple[BackendName, ...] = ("python", "c")


def load(name: BackendName) -> Backend:
    """The backend; the C one fails loudly when the accelerator was not built."""
    try:
        return backend(name)
    except ImportError:
        raise AssertionError(
            "litellm_perfkit._core._speedups was not built (no C compiler at install time): "
            "install gcc and the Python headers, then `pip install -e .` again"
        ) from None


ROOT = Path(__file__).resolve().parents[2]


def assert_survives(script: str, name: BackendName, *args: str) -> None:
    """Runs ``script`` (which prints "survived" at its end) in a fresh interpreter on
    backend ``name``: a crash (SIGSEGV) fails the test with faulthandler's frames."""
    env = {**os.environ, "PERFKIT_SPEEDUPS": "on" if name == "c" else "off"}
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.strip() == "survived", (result.returncode, result.stderr[-2000:])
