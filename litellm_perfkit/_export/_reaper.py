"""Reaping export agents whose worker was killed (Linux).

A worker killed outright (SIGKILL) leaves its export agent an orphan: it
reads EOF, flushes and exits, and is adopted by the nearest subreaper. A
multi-worker LiteLLM supervisor makes itself one (1.103's query-engine
reaper), and so is PID 1 in a container, where ``perfkit run`` is often the
entry point; neither reaps what it did not start, so the agent stayed a
zombie. In the process ``perfkit run`` became, a daemon thread waits for
such agents: each is named ``AGENT_COMM`` (its ``comm``, which a zombie
keeps), and only exited ones that this process did not start are taken, by
pid, so no other child's exit status is ever consumed.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from .._core._guard import internal_error

__all__ = ["AGENT_COMM", "OWN_AGENTS", "name_agent", "reap_orphaned_agents", "start_reaper"]

AGENT_COMM = "perfkit-agent"
OWN_AGENTS: set[int] = set()
"""Agents this process started: its own Popen waits for them."""
SCAN_INTERVAL_S = 1.0
_THREAD_NAME = "perfkit-agent-reaper"


def name_agent() -> None:
    """In the agent: set its process name, which ``ps`` shows and a zombie keeps."""
    try:
        Path("/proc/self/comm").write_text(AGENT_COMM)
    except OSError:
        pass  # not Linux: nothing adopts and forgets it there that this could help


def _children(pid: int) -> list[int]:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    children: list[int] = []
    for task in tasks:
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            return _children_by_scan(pid)  # a kernel without CONFIG_PROC_CHILDREN
    return children


def _children_by_scan(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[2] == pid:
                found.append(int(entry.name))
    return found


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(comm, state, parent pid) of a process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    comm, rest = text[text.find("(") + 1 : text.rfind(")")], text[text.rfind(")") + 2 :].split()
    return comm, rest[0], int(rest[1])


def reap_orphaned_agents() -> list[int]:
    """Wait for this process's exited children that are export agents it did
    not start; their pids."""
    reaped = []
    for pid in _children(os.getpid()):
        stat = _stat(pid)
        if stat is None or stat[0] != AGENT_COMM or stat[1] != "Z" or pid in OWN_AGENTS:
            continue
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped.append(pid)
        except ChildProcessError:
            pass
    return reaped


def _loop() -> None:
    while True:
        time.sleep(SCAN_INTERVAL_S)
        try:
            reap_orphaned_agents()
        except Exception as exc:  # counted and logged once, as every perfkit error; the host never sees it
            internal_error("export.reaper", exc)


def start_reaper() -> None:
    """Start the reaping thread in this process, once (Linux; elsewhere nothing)."""
    if not Path("/proc/self/task").is_dir() or any(t.name == _THREAD_NAME for t in threading.enumerate()):
        return
    threading.Thread(target=_loop, name=_THREAD_NAME, daemon=True).start()
