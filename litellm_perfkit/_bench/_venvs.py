"""Isolated, cached venvs, one per LiteLLM version (``--litellm-version``).

Each holds ``litellm[proxy]==VERSION`` exactly (a loose range makes pip
backtrack for minutes) and this perfkit, installed editable without its
dependencies (litellm's own pins satisfy perfkit's ranges), plus pyinstrument
for per-request profiles (litellm pins pyroscope-io itself). They live under
``$PERFKIT_CACHE_DIR`` (default ``~/.cache/litellm_perfkit``), never in a repo.

Every install runs as one of the caller's ``Children`` (its own when none
is given): a stop kills pip and what pip started, and a venv left
half-built is completed by the next run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from .._wire._environment_variables import PERFKIT_CACHE_DIR
from ._heartbeat import Say, waiting
from ._launch import Children, ChildrenClosed

__all__ = ["CACHE", "VenvError", "cache_lock", "installed", "litellm_python"]

CACHE = Path(os.environ.get(PERFKIT_CACHE_DIR, Path.home() / ".cache" / "litellm_perfkit"))
PACKAGE_ROOT = Path(__file__).resolve().parents[2]

PYINSTRUMENT = ">=4.6"
_EXACT = re.compile(r"[0-9]+(\.[0-9]+)*([a-z]+[0-9]*)?(\.post[0-9]+)?(\.dev[0-9]+)?")  # 1.103.0, 1.84.0rc1


class VenvError(RuntimeError):
    pass


def _pip(children: Children, python: Path, venv: Path, what: str, *args: str) -> None:
    """``pip install args`` into ``venv``, as one of ``children``."""
    code, tail = children.run(
        f"pip-{what}", [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args]
    )
    if code != 0:
        raise VenvError(f"cannot install {what} into {venv}: {tail[-300:]}")


def installed(python: Path) -> tuple[Path | None, bool]:
    """The checkout perfkit is installed from in ``python``'s environment
    (None when it is not), and whether pyinstrument is there."""
    # -I: without it ``python -c`` puts the working directory first on
    # sys.path, so from a perfkit checkout this would find the checkout, not
    # what the venv holds, and perfkit (and its script) would never be installed.
    check = subprocess.run(
        [
            str(python),
            "-I",
            "-c",
            "import importlib.util as u, os\n"
            "spec = u.find_spec('litellm_perfkit')\n"
            "print(os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else '-')\n"
            "print(u.find_spec('pyinstrument') is not None)",
        ],
        capture_output=True,
        text=True,
    )
    lines = check.stdout.split()
    if check.returncode != 0 or len(lines) != 2:
        return None, False
    return (None if lines[0] == "-" else Path(lines[0])), lines[1] == "True"


@contextlib.contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """Held while something is built into the cache or completed there: a bench starts its proxies
    in threads, and tests (two at a time) and benches share the cache, so two builds must never
    write one venv, npm tree or binary at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def litellm_python(version: str, say: Say | None = None, children: Children | None = None) -> Path:
    """The python of the cached venv for ``version``; builds it when missing,
    telling ``say`` what it does and for how long. Its installs run as
    ``children`` (a block of their own when None)."""
    if not _EXACT.fullmatch(version):
        raise VenvError(f"{version!r} is not an exact LiteLLM version such as 1.103.0")
    if children is None:
        with Children() as own:
            return litellm_python(version, say, own)
    tag = f"py{sys.version_info.major}.{sys.version_info.minor}"
    venv = CACHE / "venvs" / f"litellm-{version}-{tag}"
    python = venv / "bin" / "python"
    with cache_lock(venv.parent / f"{venv.name}.lock"):
        if children.closed:  # stopped while another start held the lock: not a word of installing
            raise ChildrenClosed(f"litellm {version}: not installed, its bench is stopping")
        marker = venv / ".complete"
        if not marker.exists():
            with waiting(say, f"installing litellm[proxy]=={version} into {venv} (once; later runs reuse it)"):
                code, tail = children.run("venv", [sys.executable, "-m", "venv", str(venv)])
                if code != 0:
                    raise VenvError(f"cannot create the venv {venv}: {tail[-300:]}")
                _pip(children, python, venv, "litellm", f"litellm[proxy]=={version}")
            marker.write_text(version)
        perfkit_root, has_pyinstrument = installed(python)
        if perfkit_root != PACKAGE_ROOT:
            with waiting(say, f"installing this perfkit into the litellm {version} venv"):
                _pip(children, python, venv, "perfkit", "--no-deps", "-e", str(PACKAGE_ROOT))
        if not has_pyinstrument:  # per-request profiles; litellm does not pin it
            _pip(children, python, venv, "pyinstrument", f"pyinstrument{PYINSTRUMENT}")
    return python
