"""Every process a block of code starts, children and grandchildren, and
which of them are still alive after it (Linux /proc).

A grandchild whose parent ended is re-parented away from this process, so
the tree at the end no longer shows it: the tree is sampled while the block
runs, each process named by (pid, start time) so that a reused pid is not
mistaken for it, and at the end every process in the session of one that
was seen counts too (perfkit's children each lead a session).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Process", "Started", "started_processes"]


@dataclass(frozen=True)
class Process:
    pid: int
    start_ticks: int
    """Start time after boot, in clock ticks: with the pid, names one process for good."""
    ppid: int
    session: int
    command: str
    """The command line, or the process's name when it has none (exiting, or a kernel thread)."""
    has_command_line: bool


def _read(pid: int) -> tuple[Process, str] | None:
    """The process and its state letter ("Z": ended, not yet reaped), or None when it is gone."""
    try:
        head, tail = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    fields = tail.split()
    name = command or head.split("(", 1)[1]
    return Process(pid, int(fields[19]), int(fields[1]), int(fields[3]), name, bool(command)), fields[0]


def _living() -> dict[int, Process]:
    processes = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            read = _read(int(entry.name))
            if read is not None and read[1] != "Z":
                processes[read[0].pid] = read[0]
    return processes


def _descendants(processes: dict[int, Process], root: int) -> list[Process]:
    children: dict[int, list[Process]] = {}
    for process in processes.values():
        children.setdefault(process.ppid, []).append(process)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


@dataclass
class Started:
    """What the block started (``seen``) and, once it has ended, what of it still runs (``alive``)."""

    before: set[tuple[int, int]]
    seen: dict[tuple[int, int], Process] = field(default_factory=dict)
    alive: list[Process] = field(default_factory=list)

    def sample(self) -> None:
        for process in _descendants(_living(), os.getpid()):
            key = (process.pid, process.start_ticks)
            if key not in self.before and (process.has_command_line or key not in self.seen):
                # The latest sight with a command line: one taken between fork and exec
                # shows the parent's, and an exiting process has none (its name stands in).
                self.seen[key] = process

    def still_alive(self) -> list[Process]:
        living = _living()
        sessions = {p.session for p in self.seen.values() if p.session == p.pid}
        return [
            p
            for p in living.values()
            if (p.pid, p.start_ticks) not in self.before
            and ((p.pid, p.start_ticks) in self.seen or p.session in sessions)
        ]


@contextmanager
def started_processes(interval_s: float = 0.1, grace_s: float = 5.0) -> Iterator[Started]:
    """Samples this process's tree every ``interval_s`` while the block runs;
    after it, ``alive`` lists what the block started and left running
    ``grace_s`` later (a process signalled to stop may take a moment to exit)."""
    started = Started(before={(p.pid, p.start_ticks) for p in _living().values()})
    done = threading.Event()

    def watch() -> None:
        while not done.wait(interval_s):
            started.sample()

    watcher = threading.Thread(target=watch, name="started-processes", daemon=True)
    watcher.start()
    try:
        yield started
    finally:
        done.set()
        watcher.join()
        started.sample()
        deadline = time.monotonic() + grace_s
        started.alive = started.still_alive()
        while started.alive and time.monotonic() < deadline:
            time.sleep(0.1)
            started.alive = started.still_alive()
