"""Find a console script: the one installed beside this Python first (the venv
perfkit runs from), else the first on PATH."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

__all__ = ["find_executable"]


def find_executable(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)
