"""A ``SIGPROF`` every so much of one thread's CPU time.

``setitimer(ITIMER_PROF)`` counts the CPU of every thread of the process. A
profiler of the event-loop thread then charges the CPU of the others (perfkit's
export thread, a host's thread pool) to whatever that thread was doing when the
signal came: while the loop's thread is inside a call that released the GIL
(hashing, compression, a socket), another thread's Python runs, its CPU fires
the timer, and the sample lands in the call.

Two timers count only the thread's own CPU, tried in this order:

- A ``perf_event`` task clock: the kernel runs an hrtimer only while the thread
  is on a CPU and keeps what is left of the period when it is switched out, so
  a sample comes after exactly ``interval_s`` of the thread's CPU.
- POSIX ``timer_create`` on ``CLOCK_THREAD_CPUTIME_ID``. The kernel checks it
  only at its tick, on the CPU running the thread. When the thread shares its
  core, the tick that preempts it samples it first, so code that runs while
  other threads want the core is over-counted (docs/profiling.md). Used where
  ``perf_event_open`` is refused: ``kernel.perf_event_paranoid`` above 1 for a
  user without ``CAP_PERFMON``, or a seccomp profile.

Python binds neither, so both are called through ``ctypes``. Where neither is
available (macOS), the process's timer is used, and ``clock`` says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import platform
import signal
import struct
import threading
import time
from collections.abc import Callable

from ..types import CpuClock, CpuTimerKind

__all__ = ["CpuTimer", "DEFAULT_INTERVAL_S"]

# About 200-250 samples per CPU second on each timer. A POSIX or setitimer timer samples at most
# once a kernel tick (4 ms at HZ=250): at 1 ms every tick that finds the thread running samples
# it, while a longer interval samples the thread more often just as it resumes from a wait and
# over-counts the code that waited (docs/profiling.md). perf_event has no tick: 5 ms is 5 ms.
DEFAULT_INTERVAL_S: dict[CpuTimerKind, float] = {"perf_event": 0.005, "timer_create": 0.001, "setitimer": 0.001}

_Stop = Callable[[], None]

# perf_event_open(2): the system call's number where Linux's generic ioctl and fcntl numbers apply.
_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "riscv64": 241}.get(platform.machine())
# struct perf_event_attr up to config1 (PERF_ATTR_SIZE_VER0, 64 bytes): type, size, config,
# sample_period, sample_type, read_format, the flag bits, wakeup_events, bp_type, config1.
_PERF_EVENT_ATTR = struct.Struct("IIQQQQQIIQ")
_PERF_TYPE_SOFTWARE, _PERF_COUNT_SW_TASK_CLOCK = 1, 1
_ATTR_DISABLED, _ATTR_EXCLUDE_HV = 1 << 0, 1 << 6
_PERF_FLAG_FD_CLOEXEC = 1 << 3
_PERF_EVENT_IOC_ENABLE, _PERF_EVENT_IOC_DISABLE = 0x2400, 0x2401
_F_SETSIG, _F_SETOWN_EX, _F_OWNER_TID = 10, 15, 0

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


def _libc(*functions: str) -> ctypes.CDLL:
    for name in (None, ctypes.util.find_library("c"), ctypes.util.find_library("rt")):
        try:
            library = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        if all(hasattr(library, function) for function in functions):
            return library
    raise OSError(errno.ENOSYS, f"no C library with {', '.join(functions)}")


def _start_perf_event(period_ns: int) -> _Stop:
    if _PERF_EVENT_OPEN is None:
        raise OSError(errno.ENOSYS, f"perf_event_open on {platform.machine()}")
    attr = _PERF_EVENT_ATTR.pack(
        _PERF_TYPE_SOFTWARE,
        _PERF_EVENT_ATTR.size,
        _PERF_COUNT_SW_TASK_CLOCK,
        period_ns,
        0,
        0,
        _ATTR_DISABLED | _ATTR_EXCLUDE_HV,
        1,  # wakeup_events: a signal for every sample
        0,
        0,
    )
    fd = _libc("syscall").syscall(_PERF_EVENT_OPEN, attr, 0, -1, -1, _PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "perf_event_open")
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
        fcntl.fcntl(fd, _F_SETSIG, signal.SIGPROF)
        fcntl.fcntl(fd, _F_SETOWN_EX, struct.pack("ii", _F_OWNER_TID, threading.get_native_id()))
        fcntl.ioctl(fd, _PERF_EVENT_IOC_ENABLE, 0)
    except OSError:
        os.close(fd)
        raise

    def stop() -> None:
        fcntl.ioctl(fd, _PERF_EVENT_IOC_DISABLE, 0)
        os.close(fd)

    return stop


def _start_timer_create(period_ns: int) -> _Stop:
    library = _libc("timer_create", "timer_settime", "timer_delete")
    timer = ctypes.c_void_p()
    event = _Sigevent()
    event.sigev_signo = signal.SIGPROF
    event.sigev_notify = _SIGEV_THREAD_ID
    event.thread_id = threading.get_native_id()
    if library.timer_create(_CLOCK_THREAD_CPUTIME_ID, ctypes.byref(event), ctypes.byref(timer)):
        raise OSError(ctypes.get_errno(), "timer_create")
    every = _Timespec(*divmod(period_ns, 1_000_000_000))
    if library.timer_settime(timer, 0, ctypes.byref(_Itimerspec(every, every)), None):
        library.timer_delete(timer)
        raise OSError(ctypes.get_errno(), "timer_settime")
    return lambda: library.timer_delete(timer)


def _stop_setitimer() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0, 0)


_THREAD_TIMERS: tuple[tuple[CpuTimerKind, Callable[[int], _Stop]], ...] = (
    ("perf_event", _start_perf_event),
    ("timer_create", _start_timer_create),
)


class CpuTimer:
    """``SIGPROF`` to the calling thread every ``interval_s`` of its CPU (``clock == "thread"``),
    or of the process's where no thread timer starts (``"process"``). ``kind`` says which
    timer ``start()`` started; ``interval_s=None`` takes that timer's default."""

    def __init__(self, interval_s: float | None = None, clock: CpuClock = "thread") -> None:
        self._interval_s = interval_s
        self.clock: CpuClock = clock
        self.kind: CpuTimerKind = "setitimer" if clock == "process" else _THREAD_TIMERS[0][0]
        self._stop: _Stop | None = None

    @property
    def interval_s(self) -> float:
        return self._interval_s or DEFAULT_INTERVAL_S[self.kind]

    def start(self) -> None:
        if self.clock == "thread":
            for kind, start in _THREAD_TIMERS:
                self.kind = kind  # interval_s: its default
                try:
                    self._stop = start(max(1, round(self.interval_s * 1e9)))
                    return
                except OSError:  # not on this system, or refused: try the next
                    continue
            self.clock = "process"
        self.kind = "setitimer"
        signal.setitimer(signal.ITIMER_PROF, self.interval_s, self.interval_s)
        self._stop = _stop_setitimer

    def cpu_time(self) -> float:
        """Seconds on the clock the timer counts (call it on the timer's thread)."""
        return time.thread_time() if self.clock == "thread" else time.process_time()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
