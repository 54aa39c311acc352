"""Releases of a package, as pip sees them, and where each one runs.

LiteLLM runs in its cached venv per version (``_venvs``). Any other package
(your own gateway's releases) is installed without its dependencies into a
cached directory per version, and runs with this interpreter, its
dependencies from perfkit's environment: quick, and enough for a gateway
whose dependencies do not change between the releases compared.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ._heartbeat import Say, waiting
from ._venvs import CACHE, VenvError, litellm_python

__all__ = ["Release", "available_versions", "release"]

_SAFE = re.compile(r"[A-Za-z0-9._-]+")


def available_versions(package: str, pip_args: list[str]) -> list[str]:
    """Every version pip can install of ``package`` (``pip index versions``)."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "index",
        "versions",
        package,
        "--pre",
        "--disable-pip-version-check",
        *pip_args,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    for line in result.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    detail = (result.stderr.strip().splitlines() or ["no versions listed"])[-1]
    raise VenvError(f"cannot list the releases of {package}: {detail}")


class Release:
    """Where one version runs: its interpreter and the environment to add."""

    def __init__(self, python: Path, env: dict[str, str]) -> None:
        self.python, self.env = python, env

    @property
    def bin_dir(self) -> Path:
        return self.python.parent


def release(package: str, version: str, pip_args: list[str], say: Say | None = None) -> Release:
    if package == "litellm":
        return Release(litellm_python(version, say), {})
    if not (_SAFE.fullmatch(package) and _SAFE.fullmatch(version)):
        raise VenvError(f"{package}=={version}: not a package name and an exact version")
    target = CACHE / "releases" / f"{package}-{version}"
    marker = target / ".perfkit-complete"
    if not marker.exists():
        with waiting(say, f"installing {package}=={version} into {target} (once)"):
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--upgrade",
                    "--target",
                    str(target),
                    f"{package}=={version}",
                    *pip_args,
                ],
                capture_output=True,
                text=True,
            )
        if result.returncode != 0:
            detail = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise VenvError(f"cannot install {package}=={version}: {detail}")
        marker.write_text(version)
    return Release(Path(sys.executable), {"PYTHONPATH": str(target)})
