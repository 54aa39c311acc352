"""The ``perfkit`` command line."""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
