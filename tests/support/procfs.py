"""What /proc says of a process: its children, state, start time and command
line, which processes carry a mark in their environment, and which of a
process's children are LiteLLM's workers, perfkit's export agents, or zombies.
A process (or thread) that ends while it is read has none of them."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from litellm_perfkit._wire._names import AGENT_MODULE


def children(pid: int) -> list[int]:
    """``pid``'s children, over all its threads; a thread (or the process) that ends meanwhile has none."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _stat(pid: int) -> list[str] | None:
    """Its ``stat`` fields after the command name (the state first); None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def state(pid: int) -> str | None:
    """Its state letter (``Z`` for a zombie); None when there is no such process."""
    fields = _stat(pid)
    return None if fields is None else fields[0]


def started(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot), or None when there is no such process:
    a pid seen again with another start time is another process."""
    fields = _stat(pid)
    return None if fields is None else (fields[0], int(fields[19]))


def marked(mark: bytes) -> set[int]:
    """The processes whose environment holds ``mark`` (a child inherits it, an orphan keeps it; a
    zombie's environment cannot be read)."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if mark in Path(entry.path, "environ").read_bytes():
                    found.add(int(entry.name))
    return found


def environment(pid: int, name: str) -> str | None:
    """The value of ``name`` in the environment ``pid`` started with; None when it has none."""
    for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        key, _, value = entry.partition(b"=")
        if key.decode(errors="replace") == name:
            return value.decode()
    return None


def command(pid: int) -> bytes:
    """Its command line, NUL-separated; empty when there is no such process."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def workers_of(supervisor: int) -> list[int]:
    """uvicorn's workers (multiprocessing's spawn) under a LiteLLM proxy's supervisor."""
    return [pid for pid in children(supervisor) if b"spawn_main" in command(pid)]


def agents_of(pid: int) -> list[int]:
    """The export agents ``pid`` started."""
    return [child for child in children(pid) if AGENT_MODULE.encode() in command(child)]


def zombies_of(pid: int) -> list[int]:
    return [child for child in children(pid) if state(child) == "Z"]
