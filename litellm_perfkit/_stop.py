"""SIGTERM and SIGHUP handled like Ctrl-C in perfkit's long-running commands,
and the event loop the mock and the load driver run on.

``timeout``, CI runners and container stops send SIGTERM; a closed terminal
sends SIGHUP. Either raises ``Stopped`` (a ``KeyboardInterrupt``) in the main
thread, so every cleanup written for Ctrl-C runs: children are stopped, and
bench and load write what they measured so far, marked incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "Stopped", "exit_code", "run_fast", "run_until_stopped", "signal_name", "stop_signals"]

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


def run_until_stopped(
    main: Coroutine[Any, Any, object], stop_requested: Callable[[], bool] | None = None
) -> str | None:
    """Run ``main`` on the fastest loop until it ends or a stop signal (Ctrl-C,
    SIGTERM, SIGHUP) cancels it; the signal's name, or None when it ran to the end.
    ``stop_requested``, polled ten times a second, stops it too ("parent").

    The handler only notes the signal and asks the loop to cancel ``main``:
    a stop raised from a signal handler could land inside one of uvloop's
    callbacks, which logs it and runs on to the deadline. It stays installed
    from before the loop runs until after it has closed (the loop's own
    signal handlers, once removed, leave the default action, under which a
    signal at that moment would kill this process and leave its children
    running). A signal before ``main`` starts cancels it at its first step."""
    stopped_by: list[str] = []
    cancel_main: list[Callable[[], object]] = []  # while the loop runs
    signals = (signal.SIGINT, *STOP_SIGNALS)

    def note(signum: int, frame: FrameType | None = None) -> None:
        stopped_by.append(signal.Signals(signum).name)
        for cancel in cancel_main:
            cancel()

    async def guarded() -> None:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        # Signal handlers run in the main thread, the loop's: call_soon_threadsafe
        # also wakes a loop that waits for I/O.
        cancel_main.append(lambda: loop.call_soon_threadsafe(task.cancel))
        if stopped_by:
            task.cancel()
        poller = asyncio.ensure_future(_poll(stop_requested, task, stopped_by)) if stop_requested else None
        try:
            await main
        except asyncio.CancelledError:
            if not stopped_by:
                raise
        finally:
            cancel_main.clear()
            if poller:
                poller.cancel()

    with stop_signals(note, signals):
        run_fast(guarded())
    return stopped_by[0] if stopped_by else None


async def _poll(stop_requested: Callable[[], bool], task: asyncio.Task[Any], stopped_by: list[str]) -> None:
    while not stop_requested():
        await asyncio.sleep(0.1)
    stopped_by.append("parent")
    task.cancel()


def run_fast(coroutine: Coroutine[Any, Any, None]) -> None:
    """asyncio.run on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(coroutine)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) if sys.version_info >= (3, 11) else _legacy() as runner:
        runner.run(coroutine)


@contextlib.contextmanager
def _legacy() -> Iterator[Any]:
    """Python 3.10: no asyncio.Runner."""
    import uvloop

    uvloop.install()

    class Runner:
        def run(self, coroutine: Coroutine[Any, Any, None]) -> None:
            asyncio.run(coroutine)

    yield Runner()
