"""Flamegraphs with py-spy: attach to a running process tree, or launch a command.

py-spy reads the target's memory from outside (``process_vm_readv``), so the
target runs unmodified; it needs the right to ptrace the target.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .._executables import find_executable
from ..types import FlamegraphFormat

__all__ = [
    "conform_speedscope",
    "FlamegraphOptions",
    "ProfileError",
    "PTRACE_HELP",
    "py_spy_command",
    "record",
    "start_recording",
    "stop_recording",
]


PTRACE_HELP = (
    "py-spy may not read that process's memory (ptrace refused). Fix one of: run as root or as the "
    "process's user; give py-spy CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE, or sudo setcap "
    "cap_sys_ptrace+ep $(which py-spy)); or allow tracing your own processes: sudo sysctl kernel.yama.ptrace_scope=0"
)
_PTRACE_MARKERS = ("Permission denied", "Operation not permitted", "ptrace_scope", "EPERM")


class ProfileError(RuntimeError):
    """A profile that cannot be taken; the message says why and what to do."""


@dataclass(frozen=True)
class FlamegraphOptions:
    output: str
    format: FlamegraphFormat = "speedscope"
    duration_s: float | None = None  # None: until the target exits or Ctrl-C
    sample_hz: int = 100  # samples per second
    subprocesses: bool = False  # include child processes (the proxy's workers)
    idle: bool = False  # include threads that are waiting
    native: bool = False  # include C/C++/Rust frames
    nonblocking: bool = False  # do not pause the target while sampling (less exact, less intrusive)


def _py_spy() -> str:
    found = find_executable("py-spy")
    if found is None:
        raise ProfileError("py-spy is not installed: pip install 'litellm_perfkit[profile]'")
    return found


def check_pid(pid: int) -> None:
    if pid <= 0:
        raise ProfileError(f"--pid {pid}: not a process id")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise ProfileError(f"--pid {pid}: no such process") from None
    except PermissionError:  # it exists, but belongs to someone else
        pass


def py_spy_command(options: FlamegraphOptions, pid: int | None = None, command: list[str] | None = None) -> list[str]:
    argv = [
        _py_spy(),
        "record",
        "--output",
        options.output,
        "--rate",
        str(options.sample_hz),
        "--format",
        "speedscope" if options.format == "speedscope" else "flamegraph",
    ]
    if options.duration_s is not None:
        argv += ["--duration", str(max(1, round(options.duration_s)))]
    for flag, on in (
        ("--subprocesses", options.subprocesses),
        ("--idle", options.idle),
        ("--native", options.native),
        ("--nonblocking", options.nonblocking),
    ):
        if on:
            argv.append(flag)
    if pid is not None:
        return [*argv, "--pid", str(pid)]
    if not command:
        raise ProfileError("give --pid PID or a command after --")
    return [*argv, "--", *command]


def _explain(returncode: int, stderr: str) -> str:
    if any(marker in stderr for marker in _PTRACE_MARKERS):
        return PTRACE_HELP
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]  # before any Rust backtrace
    detail = (errors or lines or [f"exit code {returncode}"])[0]
    return f"py-spy failed: {detail.removeprefix('Error: ')}"


def _spawn(
    options: FlamegraphOptions, pid: int | None = None, command: list[str] | None = None
) -> subprocess.Popen[bytes]:
    if pid is not None:
        check_pid(pid)
    Path(options.output).parent.mkdir(parents=True, exist_ok=True)
    argv = py_spy_command(options, pid=pid, command=command)
    # Its own session: py-spy's launched command shares its process group, so
    # both can be stopped together; Ctrl-C here becomes SIGINT to py-spy only.
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def start_recording(options: FlamegraphOptions, pid: int) -> subprocess.Popen[bytes]:
    """py-spy on ``pid`` in the background (its own session); stop it with ``stop_recording``."""
    return _spawn(options, pid=pid)


def stop_recording(process: subprocess.Popen[bytes], output: str, timeout_s: float = 30.0) -> Path:
    """Ask py-spy to stop (SIGINT makes it write what it has) and check the file."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    path = Path(output)
    if not path.exists() or path.stat().st_size == 0:
        raise ProfileError(_explain(process.returncode, stderr.decode(errors="replace")))
    if path.suffix == ".json":
        path.write_bytes(orjson.dumps(conform_speedscope(orjson.loads(path.read_bytes()))))
    return path


def conform_speedscope(document: dict[str, Any]) -> dict[str, Any]:
    """py-spy 0.4 writes ``null`` for optional speedscope fields (a frame's
    ``col``/``line``/``file``, ``activeProfileIndex``); speedscope's own schema
    wants them absent or numbers. Drop the nulls so the file validates."""
    for frame in document.get("shared", {}).get("frames", []):
        for key in [k for k, v in frame.items() if v is None]:
            del frame[key]
    if document.get("activeProfileIndex") is None:
        document["activeProfileIndex"] = 0
    return document


def record(options: FlamegraphOptions, pid: int | None = None, command: list[str] | None = None) -> Path:
    """Record until ``duration_s``, the target's exit, or Ctrl-C; return the file.
    A launched command is stopped (its whole process group) when recording ends."""
    process = _spawn(options, pid=pid, command=command)
    try:
        try:
            process.wait()
        except KeyboardInterrupt:
            pass
        return stop_recording(process, options.output)
    finally:
        if command:
            _stop_group(process.pid)


def _stop_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        for _ in range(50):
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
