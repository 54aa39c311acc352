"""Isolated, cached venvs, one per LiteLLM version (``--litellm-version``).

Each holds ``litellm[proxy]==VERSION`` exactly (a loose range makes pip
backtrack for minutes) and this perfkit, installed editable without its
dependencies (litellm's own pins satisfy perfkit's ranges), plus pyinstrument
for per-request profiles (litellm pins pyroscope-io itself). They live under
``$PERFKIT_CACHE_DIR`` (default ``~/.cache/litellm_perfkit``), never in a repo.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["CACHE", "VenvError", "litellm_python", "OFFLINE_ENV"]

CACHE = Path(os.environ.get("PERFKIT_CACHE_DIR", Path.home() / ".cache" / "litellm_perfkit"))
PACKAGE_ROOT = Path(__file__).resolve().parents[2]

# Keep the proxy offline and quiet: local model cost map, no telemetry.
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "DISABLE_SCHEMA_UPDATE": "True",
    "NO_PROXY": "127.0.0.1,localhost",
}


PYINSTRUMENT = ">=4.6"


class VenvError(RuntimeError):
    pass


def _pip(python: Path, venv: Path, what: str, *args: str) -> None:
    result = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise VenvError(f"cannot install {what} into {venv}: {result.stderr.strip()[-300:]}")


def litellm_python(version: str) -> Path:
    """The python of the cached venv for ``version``; builds it when missing."""
    if not version or not all(part.isdigit() for part in version.split(".")):
        raise VenvError(f"{version!r} is not an exact LiteLLM version such as 1.103.0")
    tag = f"py{sys.version_info.major}.{sys.version_info.minor}"
    venv = CACHE / "venvs" / f"litellm-{version}-{tag}"
    python = venv / "bin" / "python"
    marker = venv / ".complete"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        result = subprocess.run([*pip, f"litellm[proxy]=={version}"], capture_output=True, text=True)
        if result.returncode != 0:
            tail = result.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise VenvError(f"cannot install litellm[proxy]=={version}: {tail[0]}")
        marker.write_text(version)
    # -I: without it ``python -c`` puts the working directory first on
    # sys.path, so from a perfkit checkout the check would find that checkout
    # and never install perfkit (nor its ``perfkit`` script) into the venv.
    check = subprocess.run(
        [str(python), "-I", "-c", "import importlib.util as u, litellm_perfkit, os; print(os.path.dirname(litellm_perfkit.__file__)); "
                            "print(u.find_spec('pyinstrument') is not None)"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    lines = check.stdout.split()
    if check.returncode != 0 or Path(lines[0]).parent != PACKAGE_ROOT:
        _pip(python, venv, "perfkit", "--no-deps", "-e", str(PACKAGE_ROOT))
    if check.returncode != 0 or lines[-1] != "True":  # per-request profiles; litellm does not pin it
        _pip(python, venv, "pyinstrument", f"pyinstrument{PYINSTRUMENT}")
    return python
