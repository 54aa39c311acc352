"""SIGTERM and SIGHUP handled like Ctrl-C in perfkit's long-running commands.

``timeout``, CI runners and container stops send SIGTERM; a closed terminal
sends SIGHUP. Either raises ``Stopped`` (a ``KeyboardInterrupt``) in the main
thread, so every cleanup written for Ctrl-C runs: children are stopped, and
bench and load write what they measured so far, marked incomplete.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["STOP_SIGNALS", "Stopped", "exit_code", "signal_name", "stop_signals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal, raised where the main thread was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_name(stop: BaseException) -> str:
    """SIGTERM, SIGHUP, or SIGINT for Ctrl-C."""
    return signal.Signals(stop.signum).name if isinstance(stop, Stopped) else "SIGINT"


def exit_code(stop: BaseException) -> int:
    """128 + the signal's number, as a shell reports a process the signal ended."""
    return 128 + (stop.signum if isinstance(stop, Stopped) else signal.SIGINT)


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


@contextlib.contextmanager
def stop_signals(
    handler: Callable[[int, FrameType | None], None] = _raise, signals: tuple[int, ...] = STOP_SIGNALS
) -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``Stopped``, or go to ``handler``
    (main thread only; elsewhere a no-op). The previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in signals}
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)
