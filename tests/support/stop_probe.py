"""A command stopped by a signal at a chosen moment, with every process it
started watched until none is left (zombies count as left).

The processes are found by a mark in their environment, which every child
inherits, so one that was orphaned (its parent gone, itself adopted by init)
is still found; a zombie's environment cannot be read, so the command's
process tree is watched too.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from litellm_perfkit._bench._launch import process_tree
from tests.support import procfs

__all__ = ["BENCH_STAGES", "Moment", "Phases", "Stop", "bench_command", "bench_stages", "moments", "stop_at"]

MARK = "PERFKIT_STOP_PROBE"
POLL_S = 0.1


@dataclass(frozen=True)
class Moment:
    """``offset_s`` after the command's stderr first holds ``anchor`` (None: after it started)."""

    anchor: str | None
    offset_s: float

    def __str__(self) -> str:
        return f"{self.anchor or 'start'} +{self.offset_s:.1f}s"


@dataclass
class Stop:
    moment: Moment
    reached: bool  # False: the command ended before the moment came (or before the signal was sent)
    exit_code: int | None = None  # its own when not reached
    exit_s: float | None = None  # from the signal to the command's exit
    clean_s: float | None = None  # to the last process it started gone; None: some outlived ``limit_s``
    left: list[str] = field(default_factory=list)  # "pid state command" of those
    seen: int = 0  # processes it started, seen while it ran
    log_tail: str = ""

    def clean_within(self, limit_s: float) -> bool:
        """Ended by the signal (its own exit code, or the default action's
        before it had handlers), with every process it started gone within ``limit_s``."""
        return self.exit_code in (128 + signal.SIGTERM, -signal.SIGTERM) and (
            self.clean_s is not None and self.clean_s <= limit_s
        )


def _command(pid: int) -> str:
    """Its command line as one line of at most 160 characters ("?" when there is no such process)."""
    return procfs.command(pid).replace(b"\0", b" ").decode(errors="replace")[:160] or "?"


class _Watch:
    """Every process the command started: (pid, start time) -> its command line."""

    def __init__(self, root: int, token: bytes) -> None:
        self._root, self._token = root, token
        self.seen: dict[tuple[int, int], str] = {}

    def poll(self) -> None:
        for pid in procfs.marked(self._token) | set(process_tree(self._root)):
            started = procfs.started(pid)
            if pid != self._root and started is not None and (pid, started[1]) not in self.seen:
                self.seen[(pid, started[1])] = _command(pid)

    def left(self) -> list[tuple[int, str, str]]:
        """(pid, state, command) of those still there, zombies included."""
        living = []
        for (pid, started), command in self.seen.items():
            now = procfs.started(pid)
            if now is not None and now[1] == started:
                living.append((pid, now[0], command))
        return living


def stop_at(
    command: Sequence[str],
    moment: Moment,
    log: Path,
    *,
    cwd: Path | None = None,
    signum: int = signal.SIGTERM,
    limit_s: float = 30.0,
    timeout_s: float = 600.0,
) -> Stop:
    """Run ``command`` (stderr to ``log``), send ``signum`` to it alone at
    ``moment``, and time its exit and the end of every process it started,
    up to ``limit_s``; whatever is left then is killed."""
    token = f"{MARK}={uuid.uuid4().hex}"
    env = {**os.environ, MARK: token.split("=", 1)[1]}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            list(command), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True
        )
    watch = _Watch(process.pid, token.encode())
    stop = Stop(moment, reached=False)
    try:
        started = time.monotonic()
        deadline = started + timeout_s
        anchored = started if moment.anchor is None else None
        while anchored is None or time.monotonic() < anchored + moment.offset_s:
            watch.poll()
            if process.poll() is not None or time.monotonic() > deadline:
                stop.exit_code = process.returncode
                stop.log_tail = log.read_text(errors="replace")[-3000:]
                return stop
            if anchored is None and moment.anchor is not None and moment.anchor in log.read_text(errors="replace"):
                anchored = time.monotonic()
            time.sleep(POLL_S)
        watch.poll()
        process.send_signal(signum)  # sends nothing if the command has ended (its poll found it so)
        if process.returncode is not None:  # it ended on its own, in the last poll's interval
            stop.exit_code = process.returncode
            stop.log_tail = log.read_text(errors="replace")[-3000:]
            return stop
        stop.reached = True
        signalled = time.monotonic()
        while time.monotonic() < signalled + limit_s:
            if process.poll() is not None and stop.exit_s is None:
                stop.exit_code, stop.exit_s = process.returncode, time.monotonic() - signalled
            if process.poll() is None:
                watch.poll()
            if stop.exit_s is not None and not watch.left():
                stop.clean_s = time.monotonic() - signalled
                break
            time.sleep(POLL_S / 2)
        stop.left = [f"{pid} {state} {cmd}" for pid, state, cmd in watch.left()]
        stop.seen = len(watch.seen)
        stop.log_tail = log.read_text(errors="replace")[-3000:]
        return stop
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pid, _, _ in watch.left():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# perfkit bench with short phases, and its stages: (the stderr line each
# starts with, None for the start; how long it lasts at most with these flags).
@dataclass(frozen=True)
class Phases:
    """perfkit bench's phase lengths, in seconds."""

    direct_s: float = 10.0  # perfkit bench's own: each direct phase 1 s unmeasured, then this
    duration_s: float = 4.0  # each proxy phase, after warmup_s
    warmup_s: float = 2.0
    idle_s: float = 2.0  # after 1 s unmeasured


def bench_stages(phases: Phases = Phases()) -> tuple[tuple[str | None, float], ...]:
    proxy_phase_s = phases.duration_s + phases.warmup_s
    return (
        (None, 3.0),  # imports, the mock's start-up
        ("direct to the mock, nonstream", phases.direct_s + 1.0),
        ("direct to the mock, stream", phases.direct_s + 1.0),
        ("starting litellm", 15.0),  # the proxy's start-up
        ("proxy, nonstream phase", proxy_phase_s),
        ("proxy, stream phase", proxy_phase_s),
        ("proxy, idle phase", phases.idle_s + 1.0 + 2.5),  # and the proxy's stop after it
    )


BENCH_STAGES = bench_stages()


def bench_command(version: str, out: Path, phases: Phases = Phases()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "litellm_perfkit._cli",
        "bench",
        "--litellm-version",
        version,
        "--duration",
        f"{phases.duration_s:g}",
        "--warmup",
        f"{phases.warmup_s:g}",
        "--direct-duration",
        f"{phases.direct_s:g}",
        "--idle",
        f"{phases.idle_s:g}",
        "--progress",
        "off",
        "--out",
        str(out),
    ]


def moments(
    count: int,
    seed: int,
    stages: Sequence[int] | None = None,
    table: Sequence[tuple[str | None, float]] = BENCH_STAGES,
) -> list[Moment]:
    """``count`` moments, the stages (indexes into ``table``, default all)
    taken in turn, each at a random offset into its stage."""
    rng = random.Random(seed)
    order = list(stages) if stages is not None else list(range(len(table)))
    chosen = [table[order[i % len(order)]] for i in range(count)]
    return [Moment(anchor, round(rng.uniform(0, longest), 2)) for anchor, longest in chosen]
