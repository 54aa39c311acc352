"""The pinned LiteLLM versions the tests run, from the product's venv cache."""

from __future__ import annotations

import os
import subprocess

from litellm_perfkit._bench._launch import OFFLINE_ENV
from litellm_perfkit._bench._venvs import litellm_python

__all__ = ["VERSIONS", "litellm_env", "litellm_python", "with_packages"]

VERSIONS = ("1.83.14", "1.103.0")


def litellm_env() -> dict[str, str]:
    return {**os.environ, **OFFLINE_ENV}


def with_packages(version: str, modules: dict[str, str]) -> None:
    """Packages a LiteLLM feature needs that litellm[proxy] does not bring
    (``import name -> requirement``; ``{api}`` in a requirement is the venv's
    opentelemetry-api version), installed once into the version's cached venv."""
    python = str(litellm_python(version))
    check = subprocess.run([python, "-c", "; ".join(f"import {name}" for name in modules)], capture_output=True)
    if check.returncode == 0:
        return
    requirements = list(modules.values())
    if any("{api}" in r for r in requirements):
        api = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('opentelemetry-api'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        requirements = [r.replace("{api}", api) for r in requirements]
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
        check=True,
        capture_output=True,
    )
