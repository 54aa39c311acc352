"""Child processes of a bench: started in their own process groups, always stopped.

Each child gets a new session, so stopping it stops its whole tree (a
proxy's workers and their export agents), on success, on errors and on
Ctrl-C alike (``Children`` is a context manager).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import httpx

__all__ = ["Child", "Children", "StartError", "free_port", "tree_usage"]


class StartError(RuntimeError):
    """A child did not come up; the message ends with the last lines of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Child:
    def __init__(self, name: str, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.log: IO[bytes] = tempfile.NamedTemporaryFile(prefix=f"perfkit-{name}-", suffix=".log", delete=False)  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                command, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
            )
        except FileNotFoundError:
            raise StartError(f"{name}: command not found: {command[0]}") from None

    def tail(self, lines: int = 15) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace").strip().splitlines()
        return "\n".join(text[-lines:])

    def wait_ready(self, check: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise StartError(f"{self.name} exited with code {self.process.returncode}; its log ends:\n{self.tail()}")
            try:
                if check():
                    return
            except (OSError, httpx.HTTPError):
                pass
            if time.monotonic() > deadline:
                raise StartError(f"{self.name} was not ready after {timeout_s:g} s; its log ends:\n{self.tail()}")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(5)
        self.log.close()
        os.unlink(self.log.name)


class Children:
    """Every child of a bench; leaving the block stops them all, in reverse order."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    def start(self, name: str, command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Child:
        child = Child(name, command, env or dict(os.environ), cwd or Path.cwd())
        self.children.append(child)
        return child

    def stop(self, child: Child) -> None:
        child.stop()
        self.children.remove(child)

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: object) -> None:
        for child in reversed(self.children):
            try:
                child.stop()
            except Exception:
                pass
        self.children.clear()


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _tree(root: int) -> list[int]:
    """``root`` and all its descendants, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(parents.get(pid, []))
    return tree


def tree_usage(root: int) -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of a process tree (Linux /proc; zeros elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    cpu = rss = 0.0
    for pid in _tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / ticks
        rss += int(fields[21]) * page / 2**20
    return cpu, rss
