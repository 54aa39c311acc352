"""A ``SIGPROF`` timer on one thread's CPU clock.

``setitimer(ITIMER_PROF)`` counts the CPU of every thread of the process. A
profiler of the event-loop thread then charges the CPU of the others (perfkit's
export thread, a host's thread pool) to whatever that thread was doing when the
signal came: while the loop's thread is inside a call that released the GIL
(hashing, compression, a socket), another thread's Python runs, its CPU fires
the timer, and the sample lands in the call. POSIX ``timer_create`` on
``CLOCK_THREAD_CPUTIME_ID``, signalled to the thread itself, counts only its
own CPU. Python has no binding for it, so it is called through ``ctypes``;
where the C library lacks it (macOS), the process clock is used and said.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import threading
import time

from ..types import CpuClock

__all__ = ["CpuTimer"]

_CLOCK_THREAD_CPUTIME_ID = 3
_SIGEV_THREAD_ID = 4  # Linux: the signal goes to the thread named in the event


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Sigevent(ctypes.Structure):
    # Linux's struct sigevent: the thread id is the first member of the union after
    # the notify field; the padding brings it to the kernel's 64 bytes.
    _fields_ = [
        ("sigev_value", ctypes.c_void_p),
        ("sigev_signo", ctypes.c_int),
        ("sigev_notify", ctypes.c_int),
        ("thread_id", ctypes.c_int),
        ("padding", ctypes.c_int * 12),
    ]


def _libc() -> ctypes.CDLL | None:
    for name in (None, ctypes.util.find_library("c"), ctypes.util.find_library("rt")):
        try:
            library = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        if hasattr(library, "timer_create") and hasattr(library, "timer_settime"):
            return library
    return None


class CpuTimer:
    """``SIGPROF`` every ``interval_s`` of the calling thread's CPU (``clock == "thread"``),
    or of the process's where the thread clock's timer is not available (``"process"``).
    The kernel checks CPU timers at its tick, so intervals below it are rounded up."""

    def __init__(self, interval_s: float, clock: CpuClock = "thread") -> None:
        self.interval_s = interval_s
        self.clock: CpuClock = clock
        self._timer = ctypes.c_void_p()
        self._library = _libc() if clock == "thread" else None
        if self._library is None:
            self.clock = "process"

    def start(self) -> None:
        if self.clock == "thread":
            try:
                self._start_thread_timer()
                return
            except OSError:
                self.clock = "process"
        signal.setitimer(signal.ITIMER_PROF, self.interval_s, self.interval_s)

    def cpu_time(self) -> float:
        """Seconds on the clock the timer counts (call it on the timer's thread)."""
        return time.thread_time() if self.clock == "thread" else time.process_time()

    def stop(self) -> None:
        if self.clock == "thread":
            assert self._library is not None
            self._library.timer_delete(self._timer)
        else:
            signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def _start_thread_timer(self) -> None:
        assert self._library is not None
        event = _Sigevent()
        event.sigev_signo = signal.SIGPROF
        event.sigev_notify = _SIGEV_THREAD_ID
        event.thread_id = threading.get_native_id()
        if self._library.timer_create(_CLOCK_THREAD_CPUTIME_ID, ctypes.byref(event), ctypes.byref(self._timer)):
            raise OSError(ctypes.get_errno(), "timer_create")
        seconds, nanoseconds = divmod(max(1, round(self.interval_s * 1e9)), 1_000_000_000)
        every = _Timespec(seconds, nanoseconds)
        if self._library.timer_settime(self._timer, 0, ctypes.byref(_Itimerspec(every, every)), None):
            self._library.timer_delete(self._timer)
            raise OSError(ctypes.get_errno(), "timer_settime")
