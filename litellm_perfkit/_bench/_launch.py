"""Starting and stopping what a measurement runs: the mock provider, the
LiteLLM proxy (plain or under ``perfkit run``), any child process.

The one launcher of the bench, the tests and the benchmarks. Each child gets
a new session, so stopping it stops its whole tree (a proxy's workers and
their export agents), on success, on errors and on Ctrl-C alike
(``Children`` is a context manager). A stop signal waits while a child is
started or stopped (one taken midway would leave a process untracked, or
running), and stopping takes at most ``STOP_GRACE_S`` before the rest is killed.
Once the block is left, a child asked for is refused (``ChildrenClosed``):
a start still running in another thread (``_instances.start_instances``)
cannot leave a process behind the bench.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, NamedTuple

from .._stop import STOP_SIGNALS, Stopped, stop_signals
from .._wire._environment_variables import DISABLE_SCHEMA_UPDATE, LITELLM_LOCAL_MODEL_COST_MAP, LITELLM_TELEMETRY
from .._wire._names import AGENT_MODULE
from ._heartbeat import Say, waiting

__all__ = [
    "Agents",
    "Child",
    "Children",
    "ChildrenClosed",
    "LiteLLMProxy",
    "OFFLINE_ENV",
    "ProxyMode",
    "STOP_GRACE_S",
    "StartError",
    "TreeCpu",
    "free_port",
    "http_status",
    "port_open",
    "process_tree",
    "start_litellm",
    "start_mock",
    "tree_cpu",
    "tree_usage",
]

ProxyMode = Literal["perfkit", "plain"]
Agents = Literal["include", "exclude", "only"]
"""Which processes of a proxy's tree count: perfkit's export agents too, all but them, or them alone."""


STOP_GRACE_S = 5.0
"""How long a child's process group has to end after SIGTERM before it is
killed: a LiteLLM proxy shuts down in about a second, and a stopped bench
must leave nothing behind within 10 s."""


# Keep the proxy offline and quiet: local model cost map, no telemetry.
OFFLINE_ENV = {
    LITELLM_LOCAL_MODEL_COST_MAP: "True",
    LITELLM_TELEMETRY: "False",
    DISABLE_SCHEMA_UPDATE: "True",
    "NO_PROXY": "127.0.0.1,localhost",
}


class StartError(RuntimeError):
    """A child did not come up; the message ends with the last lines of its log."""


class ChildrenClosed(RuntimeError):
    """A child asked for after its ``Children`` block was left (the bench is
    stopping): it is not started; and a child run to its end (``Children.run``)
    that the block's exit stopped."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Child:
    """One child process in a session of its own. Its output goes to ``log_path``
    (kept), or to a temporary file removed when it stops."""

    def __init__(
        self, name: str, command: list[str], env: dict[str, str], cwd: Path, log_path: Path | None = None
    ) -> None:
        self.command = command
        self.name = name
        self._keep_log = log_path is not None
        self.log: IO[bytes] = (
            log_path.open("wb")
            if log_path is not None
            else tempfile.NamedTemporaryFile(prefix=f"perfkit-{name}-", suffix=".log", delete=False)  # noqa: SIM115
        )
        try:
            self.process = subprocess.Popen(
                command, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
            )
        except FileNotFoundError:
            raise StartError(f"{name}: command not found: {command[0]}") from None

    def tail(self, lines: int = 15) -> str:
        try:
            self.log.flush()
            text = Path(self.log.name).read_text(errors="replace").strip().splitlines()
        except (OSError, ValueError):  # stopped meanwhile: its temporary log closed and removed
            return "(its log is gone)"
        return "\n".join(text[-lines:])

    def wait_ready(self, check: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise StartError(
                    f"{self.name} exited with code {self.process.returncode}; its log ends:\n{self.tail()}"
                )
            try:
                if check():
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise StartError(f"{self.name} was not ready after {timeout_s:g} s; its log ends:\n{self.tail()}")
            time.sleep(0.3)

    def died(self) -> str | None:
        """How the child ended, if it has: "exit code N" or "killed by SIGNAME"."""
        code = self.process.poll()
        if code is None:
            return None
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"

    def terminate(self) -> None:
        """SIGTERM to its process group: the child, and what it started that is still there."""
        _signal_group(self.process.pid, signal.SIGTERM)

    def finish(self, deadline: float) -> None:
        """After ``terminate``: wait until the group is gone or ``deadline``
        (time.monotonic), then kill what is left; close the log."""
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        # Its workers and their export agents can outlive the leader a moment.
        while _group_alive(self.process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        _signal_group(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()
        if not self._keep_log:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.log.name)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        self.terminate()
        self.finish(time.monotonic() + grace_s)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@contextlib.contextmanager
def held_stops() -> Iterator[None]:
    """Stop signals (Ctrl-C, SIGTERM, SIGHUP) wait until the block has run,
    then the first raises as it would have (main thread; elsewhere a no-op)."""
    held: list[int] = []
    try:
        with stop_signals(lambda signum, frame: held.append(signum), (signal.SIGINT, *STOP_SIGNALS)):
            yield
    finally:
        if held:
            raise KeyboardInterrupt if held[0] == signal.SIGINT else Stopped(held[0])


class Children:
    """Every child of a bench; leaving the block stops them all, in reverse
    order, and refuses any child asked for after (``ChildrenClosed``). Safe to
    use from several threads (a bench starts its proxies side by side)."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self._lock = threading.Lock()
        self._closed = False

    def start(
        self,
        name: str,
        command: list[str],
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        log_path: Path | None = None,
    ) -> Child:
        # Under the lock, a child is either registered before the block's exit
        # takes the list, and stopped with the others, or refused: never left out.
        with held_stops(), self._lock:
            if self._closed:
                raise ChildrenClosed(f"{name}: not started, its bench is stopping")
            child = Child(name, command, env or dict(os.environ), cwd or Path.cwd(), log_path)
            self.children.append(child)
        return child

    def run(
        self, name: str, command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> tuple[int, str]:
        """``command`` run to its end as a child, stopped with the others if the
        block is left meanwhile (``ChildrenClosed``): its exit code and the last lines of its output."""
        child = self.start(name, command, env, cwd)
        try:
            code = child.process.wait()
            with self._lock:
                if self._closed:
                    raise ChildrenClosed(f"{name}: stopped with its bench")
                return code, child.tail(5)
        finally:
            self.stop(child)

    def stop(self, child: Child) -> None:
        """Stop ``child`` now (nothing to do when the block's exit has taken it)."""
        with held_stops():
            with self._lock:
                if child not in self.children:
                    return
                self.children.remove(child)
            child.stop()

    @property
    def closed(self) -> bool:
        """The block was left: a child asked for now is refused."""
        return self._closed

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: object) -> None:
        # Last started first (a proxy before the mock it calls: stopped together,
        # the proxy's requests in flight fail and retry, and its shutdown waits
        # for them), within one grace for all, each at least a second.
        with held_stops():
            with self._lock:
                self._closed = True
                children, self.children = self.children, []
            deadline = time.monotonic() + STOP_GRACE_S
            for child in reversed(children):
                with contextlib.suppress(Exception):
                    child.terminate()
                    child.finish(max(deadline, time.monotonic() + 1.0))


def http_status(host: str, port: int, path: str, timeout_s: float = 1.0) -> int:
    """The status of ``GET path`` (http.client: no proxy settings apply, no extra needed)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def process_tree(root: int) -> list[int]:
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


class _ProcessUsage(NamedTuple):
    agent: bool  # one of perfkit's export agents
    cpu_s: float
    rss_mib: float


def _tree_processes(root: int) -> Iterator[_ProcessUsage]:
    """Each process of a tree as /proc shows it now (Linux; none elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in process_tree(root):
        try:
            agent = AGENT_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu_s = _cpu_clock_s(pid, (int(fields[11]) + int(fields[12])) / ticks)
        yield _ProcessUsage(agent, cpu_s, int(fields[21]) * page / 2**20)


def tree_usage(root: int, agents: Agents = "include") -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of a process tree (Linux /proc; zeros elsewhere),
    with or without perfkit's export agents, or theirs alone."""
    cpu = rss = 0.0
    for process in _tree_processes(root):
        if agents == "include" or process.agent == (agents == "only"):
            cpu += process.cpu_s
            rss += process.rss_mib
    return cpu, rss


class TreeCpu(NamedTuple):
    """A process tree's CPU seconds, read in one walk."""

    total_s: float  # export agents included
    agents_s: float  # perfkit's export agents alone

    @property
    def own_s(self) -> float:
        """The tree's less its export agents'."""
        return self.total_s - self.agents_s


def tree_cpu(root: int) -> TreeCpu:
    total = agents = 0.0
    for process in _tree_processes(root):
        total += process.cpu_s
        agents += process.cpu_s if process.agent else 0.0
    return TreeCpu(total, agents)


def _cpu_clock_s(pid: int, ticks_s: float) -> float:
    """A process's CPU seconds, all its threads (ended ones too), to the
    nanosecond: the kernel's clock for that process (``clock_getcpuclockid``'s
    encoding). /proc's are in 10 ms ticks, too coarse for an export agent that
    spends a few milliseconds in a short run; ``ticks_s`` when the clock cannot be read."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # CPUCLOCK_SCHED of the whole process
    except (OSError, AttributeError, OverflowError):
        return ticks_s


def start_mock(children: Children, *flags: str, pin_cpu: str | None = None, timeout_s: float = 30) -> str:
    """``perfkit mock`` as its own process on a free port; its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "litellm_perfkit._cli", "mock", "--port", str(port), *flags]
    if pin_cpu is not None:
        command = ["taskset", "-c", pin_cpu, *command]
    children.start("mock", command).wait_ready(lambda: port_open(port), timeout_s=timeout_s)
    return f"http://127.0.0.1:{port}"


@dataclass
class LiteLLMProxy:
    url: str
    child: Child
    config: Path

    @property
    def pid(self) -> int:
        """The proxy's main process (``perfkit run`` execs it: the same pid; under taskset too)."""
        return self.child.process.pid


def start_litellm(
    children: Children,
    litellm: Path,
    perfkit: Path,
    config_text: str,
    workdir: Path,
    *,
    workers: int = 1,
    mode: ProxyMode = "perfkit",
    perfkit_args: Sequence[str] = (),
    litellm_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    pin_cpu: str | None = None,
    host: str = "127.0.0.1",
    timeout_s: float = 180,
    say: Say | None = None,
) -> LiteLLMProxy:
    """The LiteLLM proxy (its ``litellm`` script) with ``config_text`` and
    ``litellm_args``, plain or under ``perfkit run`` (the ``perfkit`` script installed beside it);
    returns once every worker has started and it answers its health check."""
    port = free_port()
    config = workdir / f"litellm-{port}.yaml"
    config.write_text(config_text)
    command = [
        str(litellm),
        "--config",
        str(config),
        "--host",
        host,
        "--port",
        str(port),
        "--num_workers",
        str(workers),
        *litellm_args,
    ]
    if mode == "perfkit":
        command = [str(perfkit), "run", *perfkit_args, "--", *command]
    if pin_cpu is not None:
        command = ["taskset", "-c", pin_cpu, *command]
    # faulthandler: a crash in the proxy leaves its Python stack in the log.
    child_env = {**os.environ, **OFFLINE_ENV, "PYTHONFAULTHANDLER": "1", **(env or {})}
    child = children.start(f"litellm-{port}", command, child_env, workdir, log_path=workdir / f"proxy-{port}.log")
    url = f"http://{host}:{port}"

    def ready() -> bool:
        # One worker answers health checks before the others have imported
        # LiteLLM: wait for each worker's own startup line too.
        if http_status(host, port, "/health/liveliness") != 200:
            return False
        return Path(child.log.name).read_text(errors="replace").count("Application startup complete.") >= workers

    with waiting(say, f"waiting for the LiteLLM proxy ({workers} worker(s)) to start"):
        child.wait_ready(ready, timeout_s=timeout_s)
    return LiteLLMProxy(url, child, config)
