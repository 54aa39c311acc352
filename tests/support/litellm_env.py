"""Per-version LiteLLM venvs, built once and cached outside the repo.

Each holds ``litellm[proxy]==VERSION`` exactly (a loose range makes pip
backtrack for minutes here) and this checkout of perfkit, installed editable
without its dependencies (litellm's own pins satisfy perfkit's ranges).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.servers import CACHE, REPO

VERSIONS = ("1.83.14", "1.103.0")

OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "DISABLE_SCHEMA_UPDATE": "True",
    "NO_PROXY": "127.0.0.1,localhost",
}


def litellm_python(version: str) -> Path:
    """The python of the cached venv for ``version``; builds it when missing."""
    tag = f"py{sys.version_info.major}.{sys.version_info.minor}"
    venv = CACHE / "venvs" / f"litellm-{version}-{tag}"
    python = venv / "bin" / "python"
    marker = venv / ".complete"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        result = subprocess.run([*pip, f"litellm[proxy]=={version}"], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"cannot install litellm[proxy]=={version}:\n{result.stderr[-3000:]}")
        marker.write_text(version)
    # perfkit itself, editable, so the venv always runs this checkout.
    check = subprocess.run([str(python), "-c", "import litellm_perfkit, os; print(os.path.dirname(litellm_perfkit.__file__))"],
                           capture_output=True, text=True)  # fmt: skip
    if check.returncode != 0 or Path(check.stdout.strip()).parent != REPO:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)], check=True, capture_output=True)
    return python


def litellm_env() -> dict[str, str]:
    return {**os.environ, **OFFLINE_ENV}
