"""Timing and counting checks that a collection of the test process's heap would move."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_collections() -> Iterator[None]:
    """The automatic garbage collector off inside the block, as it was after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
