"""SIGTERM and SIGHUP stop every long-running command as Ctrl-C does: no
process is left behind, and bench and load write what they measured."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._bench._launch import Children, free_port, http_status, port_open, process_tree
from tests.support.documents import validate
from tests.support.mock_server import mock_process
from tests.support.procfs import command, state
from tests.support.proxy import launched_proxy

ROOT = Path(__file__).resolve().parents[2]
PERFKIT = [sys.executable, "-m", "litellm_perfkit._cli"]
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with mock_process("--ttft-ms", "5", "--itl-ms", "1", "--chunks", "5") as url:
        yield url


def alive(pids: list[int]) -> list[int]:
    """Those still running: neither gone nor a zombie."""
    return [pid for pid in pids if state(pid) not in (None, "Z")]


def left_after(pids: list[int], within_s: float = 1.0) -> list[int]:
    """Those of ``pids`` still alive once all are gone or ``within_s`` has passed
    (children a stopped command stopped are reaped by then)."""
    deadline = time.monotonic() + within_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive(pids)


def stop_midway(
    command: list[str], ready: Callable[[], bool], signum: int = signal.SIGTERM, timeout_s: float = 120
) -> tuple[int, str, list[int]]:
    """Start ``command``; once ``ready()``, send ``signum`` to it alone; its exit
    code, its stderr, and its descendants that outlived it."""
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert process.poll() is None, process.stderr.read().decode()[-3000:] if process.stderr else ""
            assert time.monotonic() < deadline, "the command never got ready"
            time.sleep(0.2)
        descendants = [pid for pid in process_tree(process.pid) if pid != process.pid]
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=90)
        return process.returncode, stderr.decode(), left_after(descendants)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


@pytest.mark.parametrize(("processes", "signum"), [(1, signal.SIGTERM), (2, signal.SIGTERM), (1, signal.SIGHUP)])
def test_load_writes_what_it_measured(upstream: str, tmp_path: Path, processes: int, signum: int) -> None:
    out, records = tmp_path / "load.json", tmp_path / "records.jsonl"
    command = [
        *PERFKIT,
        "load",
        "--url",
        upstream,
        "--duration",
        "60s",
        "--processes",
        str(processes),
        "--progress",
        "off",
        "--out",
        str(out),
        "--out",
        str(records),
    ]
    code, stderr, left = stop_midway(command, lambda: lines(records) >= 50, signum)
    assert code == 128 + signum and f"stopped by {signal.Signals(signum).name}" in stderr, stderr
    assert left == []
    document = orjson.loads(out.read_bytes())
    validate(document, "load")
    assert document["complete"] is False and document["stopped_by"] == signal.Signals(signum).name
    assert document["summary"]["ok"] >= 50 and document["summary"]["duration_s"] < 60


def test_load_through_locust_writes_what_it_measured(upstream: str, tmp_path: Path) -> None:
    out, records = tmp_path / "load.json", tmp_path / "records.jsonl"
    command = [
        *PERFKIT,
        "load",
        "--url",
        upstream,
        "--driver",
        "locust",
        "--duration",
        "60s",
        "--out",
        str(out),
        "--out",
        str(records),
    ]
    started = time.monotonic()
    # Locust and gevent start in seconds here; on a machine three times slower, in more than 8.
    code, stderr, left = stop_midway(command, lambda: time.monotonic() - started > 15)
    assert code == 143 and "stopped by SIGTERM" in stderr, stderr
    assert left == []
    document = orjson.loads(out.read_bytes())
    assert document["complete"] is False and document["summary"]["ok"] > 0


def test_bench_keeps_the_repeats_it_finished(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    gateway = (
        f"{sys.executable} {ROOT / 'tests' / 'support' / 'delay_gateway.py'} --port {{port}} --upstream {{upstream}}"
    )
    command = [
        *PERFKIT,
        "bench",
        "--proxy-command",
        gateway,
        "--duration",
        "2s",
        "--warmup",
        "0",
        "--direct-duration",
        "1",  # the baseline is not what a stop keeps or drops
        "--repeats",
        "3",
        "--concurrency",
        "4",
        "--stream-concurrency",
        "2",
        "--progress",
        "off",
        "--out",
        str(out),
    ]
    log = tmp_path / "bench.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # The second repeat's first phase has started: one repeat is finished.
        while log.read_text().count("proxy, nonstream phase") < 2:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        descendants = [pid for pid in process_tree(process.pid) if pid != process.pid]
        process.send_signal(signal.SIGTERM)
        process.wait(90)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 143, log.read_text()[-3000:]
    assert "stopped by SIGTERM" in log.read_text()
    assert left_after(descendants) == []
    document = orjson.loads(out.read_bytes())
    validate(document, "bench")
    assert document["complete"] is False and document["stopped_by"] == "SIGTERM" and document["repeats"] == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_mock_stops(signum: int) -> None:
    port = free_port()
    code, stderr, left = stop_midway([*PERFKIT, "mock", "--port", str(port)], lambda: port_open(port), signum)
    assert code == 128 + signum and left == [], stderr


def test_mock_stops_under_load() -> None:
    """A signal that comes while connections open and close still stops the
    mock at once (raised inside one of uvloop's callbacks, it was lost)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    load = [*PERFKIT, "load", "--url", url, "--concurrency", "64", "--duration", "60s", "--progress", "off"]
    with Children() as children:
        mock = children.start("mock", [*PERFKIT, "mock", "--port", str(port)])
        mock.wait_ready(lambda: port_open(port), timeout_s=30)
        children.start("load", load)
        time.sleep(2)  # the load runs
        assert mock.died() is None, mock.tail()
        mock.process.send_signal(signal.SIGTERM)
        mock.process.wait(10)  # stuck: TimeoutExpired
        assert mock.process.returncode == 143 and "stopped by SIGTERM" in mock.tail(), mock.tail()


def test_flamegraph_stops_its_command_and_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "busy.speedscope.json"
    busy = [sys.executable, "-c", "import time\nwhile True: sum(range(1000))"]
    started = time.monotonic()
    code, stderr, left = stop_midway(
        [*PERFKIT, "flamegraph", "--out", str(out), "--", *busy], lambda: time.monotonic() - started > 3
    )
    assert code == 0 and out.exists() and out.stat().st_size > 0, stderr
    assert left == []


# Two workers and SIGTERM: tests/litellm/test_workers.py, on a proxy one of whose
# workers was killed and respawned (each worker's graceful shutdown, every process gone).
@pytest.mark.litellm
@pytest.mark.parametrize(("workers", "signum"), [(1, signal.SIGHUP)])
def test_run_leaves_no_worker_or_agent_behind(upstream: str, tmp_path: Path, workers: int, signum: int) -> None:
    with launched_proxy("1.103.0", upstream, tmp_path, workers=workers, perfkit_args=("--exporter", "none")) as proxy:
        # Each serving process starts its export agent with its first records to hand over.
        deadline = time.monotonic() + 30
        while True:
            assert http_status("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]), "/health/liveliness") == 200
            descendants = [pid for pid in process_tree(proxy.pid) if pid != proxy.pid]
            agents = [pid for pid in [proxy.pid, *descendants] if b"_export._agent" in command(pid)]
            if agents or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert agents and len(descendants) >= workers  # workers and their export agents
        os.kill(proxy.pid, signum)  # the proxy alone, not its process group
        deadline = time.monotonic() + 60
        while alive([proxy.pid, *descendants]) and time.monotonic() < deadline:
            time.sleep(0.3)
        log = Path(proxy.child.log.name).read_text()
        assert alive([proxy.pid, *descendants]) == [], log[-3000:]
        # SIGHUP too went through uvicorn's graceful shutdown, where perfkit flushes its last spans.
        assert "Application shutdown complete" in log, log[-3000:]
