"""The export agent as the app sees it: its process and the pipe to it."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import subprocess
import sys
from pathlib import Path

import orjson

try:
    import fcntl
except ImportError:  # not on Windows
    fcntl = None  # type: ignore[assignment]

from .._core._layouts import FRAME_HEAD, FrameKind
from .._wire._environment_variables import PERFKIT_AGENT_SETTINGS, PERFKIT_APP_PID, PERFKIT_ROLE
from .._wire._names import AGENT_MODULE
from ._frames import GIVE_UP_SIGNAL
from ._reaper import OWN_AGENTS
from ._settings import ExportSettings

__all__ = ["AgentProcess"]

_PIPE_BYTES = 1 << 20  # Linux's default pipe-max-size for unprivileged processes


def _widen_pipe(fd: int) -> None:
    """Let one drain's batch fit in the pipe to the agent (Linux; 64 KiB by
    default). A batch larger than the pipe went through in many small
    block-and-wake rounds with the agent on the other core, and those cost
    the export thread more CPU than the rest of the drain (docs/overhead.md)."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if set_size is None:
        return
    try:
        fcntl.fcntl(fd, set_size, _PIPE_BYTES)
    except OSError:
        pass  # above /proc/sys/fs/pipe-max-size or the user's pipe quota: keep the default


class AgentProcess:
    """The export agent process and the pipe to it."""

    def __init__(self, settings: ExportSettings) -> None:
        package_parent = str(Path(__file__).resolve().parents[2])
        env = {
            **os.environ,
            PERFKIT_AGENT_SETTINGS: orjson.dumps(dataclasses.asdict(settings)).decode(),
            "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")])),
            PERFKIT_ROLE: "agent",  # the zero-code bootstrap must not instrument the agent
            PERFKIT_APP_PID: str(os.getpid()),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", AGENT_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        OWN_AGENTS.add(self.process.pid)
        assert self.process.stdin is not None and self.process.stdout is not None
        _widen_pipe(self.process.stdin.fileno())
        self._stdin = self.process.stdin
        self._stdout = self.process.stdout
        self.last_stats: dict[str, int] = {}

    def send(self, kind: bytes, payload: bytes) -> None:
        self.send_frame(FRAME_HEAD.pack(kind, len(payload)) + payload)

    def send_frame(self, frame: bytes) -> None:
        self._stdin.write(frame)
        self._stdin.flush()

    def fileno(self) -> int:
        """For writes that bypass the buffered writer (it is always flushed)."""
        return self._stdin.fileno()

    def flush(self) -> dict[str, int]:
        self.send(FrameKind.FLUSH, b"")
        self.last_stats = orjson.loads(self._stdout.readline() or b"{}")
        return self.last_stats

    def close(self, timeout_s: float) -> dict[str, int]:
        """EOF, then its last stats. A backlog for a backend that never answers
        could take it minutes: past ``timeout_s`` it is told to give up (it drops
        and counts the rest, after the export in progress), and past as long
        again it is killed; what it had not handled is then counted as lost."""
        try:
            self._stdin.close()
            if not select.select([self._stdout], [], [], timeout_s)[0]:
                self.give_up()
            if select.select([self._stdout], [], [], timeout_s)[0]:
                line = self._stdout.readline()
                if line:
                    self.last_stats = orjson.loads(line)
            self.process.wait(timeout=timeout_s)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.process.kill()
        self.reap()
        return self.last_stats

    def forget(self) -> None:
        """In a forked child: this process's copies of the pipes point at
        /dev/null instead (the file objects may still close them; nothing of
        the child's reaches the parent's agent); the agent stays the parent's."""
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for pipe in (self._stdin, self._stdout):
                with contextlib.suppress(OSError, ValueError):
                    os.dup2(null, pipe.fileno())
        finally:
            os.close(null)

    def give_up(self) -> None:
        """Drop (and count) what it holds instead of exporting it (``GIVE_UP_SIGNAL``)."""
        with contextlib.suppress(OSError):
            self.process.send_signal(GIVE_UP_SIGNAL)

    def reap(self) -> None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        with contextlib.suppress(OSError):
            self._stdout.close()
