"""The real proxy under ``perfkit run`` with 2 workers, one of them killed:
uvicorn respawns it, the new worker is instrumented and exports, the killed
worker's export agent is no zombie, the supervisor runs no agent, and once
the proxy has exited no process perfkit started is left."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from litellm_perfkit._bench import CONFIG_TEMPLATE
from litellm_perfkit._bench._launch import Children, _tree, start_litellm
from litellm_perfkit._wire._names import AGENT_MODULE
from tests.support.fault_matrix import _children
from tests.support.litellm_env import VERSIONS, litellm_python
from tests.support.mock_server import mock_process
from tests.support.proxy import _patient
from tests.support.receiver import Received, otlp_receiver, spans_of

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

BODY = {"model": "fake-openai-endpoint", "messages": [{"role": "user", "content": "hi"}]}


def children(pid: int) -> list[int]:
    return _children(pid)


def state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def workers_of(supervisor: int) -> list[int]:
    return [pid for pid in children(supervisor) if b"spawn_main" in command(pid)]


def agents_of(pid: int) -> list[int]:
    return [child for child in children(pid) if AGENT_MODULE.encode() in command(child)]


def zombies_of(pid: int) -> list[int]:
    return [child for child in children(pid) if state(child) == "Z"]


def exported_by(url: str, received: Received, worker: int, timeout_s: float = 60) -> bool:
    """Send requests, each on a new connection, until a span from ``worker``
    arrives (the workers share one socket: the kernel picks)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for _ in range(8):
            with httpx.Client(timeout=30, headers={"authorization": "Bearer sk-1234"}) as client:
                assert client.post(f"{url}/v1/chat/completions", json=BODY).status_code == 200
        time.sleep(0.5)
        if any(span["pid"] == worker for span in spans_of(received)):
            return True
    return False


def wait_for(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_killed_worker_is_replaced_instrumented_and_leaves_nothing_behind(tmp_path: Path, version: str) -> None:
    bin_dir = litellm_python(version).parent
    with (
        mock_process("--ttft-ms", "5", "--itl-ms", "1", "--chunks", "5") as upstream,
        otlp_receiver() as (endpoint, received),
        Children() as launched,
    ):
        proxy = start_litellm(
            launched,
            bin_dir / "litellm",
            bin_dir / "perfkit",
            CONFIG_TEMPLATE.replace("{upstream}", upstream),
            tmp_path,
            workers=2,
            perfkit_args=("--endpoint", endpoint, "--protocol", "http/json", "--record-rate", "all"),
            litellm_args=_patient(bin_dir, 2, ()),
            timeout_s=600,  # two workers importing LiteLLM on a busy 2-core machine
        )
        supervisor, log = proxy.pid, Path(proxy.child.log.name)
        first = workers_of(supervisor)
        assert len(first) == 2, first
        for worker in first:
            assert exported_by(proxy.url, received, worker), f"worker {worker} exported nothing"
        victim = first[0]
        [victim_agent] = agents_of(victim)
        seen = set(_tree(supervisor))

        os.kill(victim, signal.SIGKILL)
        assert wait_for(lambda: len(set(workers_of(supervisor)) - set(first)) == 1, 60), log.read_text()[-3000:]
        [replacement] = set(workers_of(supervisor)) - set(first)
        assert wait_for(lambda: log.read_text().count("Application startup complete.") >= 3, 180), log.read_text()[
            -3000:
        ]
        assert exported_by(proxy.url, received, replacement), "the respawned worker exported nothing"
        # The killed worker's agent flushed, exited and was reaped, not left a zombie of the supervisor.
        assert wait_for(lambda: state(victim_agent) is None, 15), (victim_agent, state(victim_agent))
        assert zombies_of(supervisor) == []
        assert [pid for pid in _tree(supervisor) if state(pid) == "Z"] == []  # none anywhere in the tree
        assert agents_of(supervisor) == []  # the supervisor never serves: no agent of its own
        seen |= set(_tree(supervisor))

        os.kill(supervisor, signal.SIGTERM)  # the supervisor alone, as a container stop does
        proxy.child.process.wait(30)  # this test's child: reaped here
        # Both serving workers (the survivor and the replacement) went through uvicorn's
        # graceful shutdown, where perfkit flushes its last spans.
        assert log.read_text().count("Application shutdown complete.") >= 2, log.read_text()[-3000:]
        seen.discard(supervisor)
        assert wait_for(lambda: all(state(pid) is None for pid in seen), 30), [
            (pid, state(pid), command(pid)[:80]) for pid in seen if state(pid) is not None
        ]
