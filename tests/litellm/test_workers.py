"""The real proxy under ``perfkit run`` with 2 workers, one of them killed:
uvicorn respawns it, the new worker is instrumented and exports, the killed
worker's export agent is no zombie, the supervisor runs no agent, and once
the proxy has exited no process perfkit started is left."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from litellm_perfkit._bench._launch import process_tree
from tests.support.litellm_env import VERSIONS
from tests.support.mock_server import mock_process
from tests.support.polling import wait_until
from tests.support.procfs import agents_of, command, state, workers_of, zombies_of
from tests.support.proxy import PATIENCE_S, launched_proxy
from tests.support.receiver import Received, otlp_receiver, spans_of

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

BODY = {"model": "fake-openai-endpoint", "messages": [{"role": "user", "content": "hi"}]}


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


@pytest.mark.parametrize("version", VERSIONS)
def test_a_killed_worker_is_replaced_instrumented_and_leaves_nothing_behind(tmp_path: Path, version: str) -> None:
    with (
        mock_process("--ttft-ms", "5", "--itl-ms", "1", "--chunks", "5") as upstream,
        otlp_receiver() as (endpoint, received),
        launched_proxy(
            version,
            upstream,
            tmp_path,
            workers=2,
            perfkit_args=("--endpoint", endpoint, "--protocol", "http/json", "--record-rate", "all"),
            timeout_s=600,  # two workers importing LiteLLM on a busy 2-core machine
        ) as proxy,
    ):
        supervisor, log = proxy.pid, Path(proxy.child.log.name)
        first = workers_of(supervisor)
        assert len(first) == 2, first
        for worker in first:
            assert exported_by(proxy.url, received, worker), f"worker {worker} exported nothing"
        victim = first[0]
        [victim_agent] = agents_of(victim)
        seen = set(process_tree(supervisor))

        os.kill(victim, signal.SIGKILL)
        # A kill that lands while the supervisor waits for the victim's answer to a ping is
        # seen only when that wait ends (PATIENCE_S; in CI 1.83.14's replacement was not
        # started within 60 s).
        replaced_within_s = 60 + PATIENCE_S
        assert wait_until(lambda: len(set(workers_of(supervisor)) - set(first)) == 1, replaced_within_s) is not None, (
            log.read_text()[-3000:]
        )
        [replacement] = set(workers_of(supervisor)) - set(first)
        assert wait_until(lambda: log.read_text().count("Application startup complete.") >= 3, 180) is not None, (
            log.read_text()[-3000:]
        )
        assert exported_by(proxy.url, received, replacement), "the respawned worker exported nothing"
        # The killed worker's agent flushed, exited and was reaped, not left a zombie of the supervisor.
        assert wait_until(lambda: state(victim_agent) is None, 15) is not None, (victim_agent, state(victim_agent))
        assert zombies_of(supervisor) == []
        assert [pid for pid in process_tree(supervisor) if state(pid) == "Z"] == []  # none anywhere in the tree
        assert agents_of(supervisor) == []  # the supervisor never serves: no agent of its own
        seen |= set(process_tree(supervisor))

        os.kill(supervisor, signal.SIGTERM)  # the supervisor alone, as a container stop does
        proxy.child.process.wait(30)  # this test's child: reaped here
        # Both serving workers (the survivor and the replacement) went through uvicorn's
        # graceful shutdown, where perfkit flushes its last spans.
        assert log.read_text().count("Application shutdown complete.") >= 2, log.read_text()[-3000:]
        seen.discard(supervisor)
        assert wait_until(lambda: all(state(pid) is None for pid in seen), 30) is not None, [
            (pid, state(pid), command(pid)[:80]) for pid in seen if state(pid) is not None
        ]
