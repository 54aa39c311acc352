"""Say what a long wait is for, and how long it has taken, while it lasts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Say", "waiting"]

Say = Callable[[str], None]


@contextmanager
def waiting(say: Say | None, what: str, every_s: float = 15.0) -> Iterator[None]:
    """``what`` when the wait begins, then every ``every_s`` how long it has
    taken, and the total when it ends (nothing when ``say`` is None)."""
    if say is None:
        yield
        return
    started = time.monotonic()
    done = threading.Event()
    say(f"{what} ...")

    def beat() -> None:
        while not done.wait(every_s):
            say(f"{what}: {time.monotonic() - started:.0f} s so far")

    thread = threading.Thread(target=beat, name="perfkit-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
    say(f"{what}: done in {time.monotonic() - started:.0f} s")
