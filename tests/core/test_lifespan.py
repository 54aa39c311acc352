"""An app wrapped in PerfkitMiddleware and served by uvicorn, stopped by
SIGTERM: uvicorn shuts down gracefully, then re-raises the signal, so the
process dies by it and ``atexit`` never runs. The last requests' spans are
flushed at the lifespan's shutdown instead (_middleware, _sink.at_shutdown)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import httpx
import orjson

from litellm_perfkit._bench._launch import Children, free_port, port_open

ROOT = Path(__file__).resolve().parents[2]


def test_the_spans_of_the_last_requests_are_written_when_sigterm_stops_uvicorn(tmp_path: Path) -> None:
    jsonl = tmp_path / "spans.jsonl"
    port = free_port()
    with Children() as children:
        gateway = children.start(
            "cpu_gateway",
            [sys.executable, "-m", "tests.support.cpu_gateway", "--port", str(port), "--jsonl", str(jsonl)],
            env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "60000"},  # nothing exported before the signal
            cwd=ROOT,
        )
        gateway.wait_ready(lambda: port_open(port), 30)
        for _ in range(3):
            assert httpx.post(f"http://127.0.0.1:{port}/work", content=b"{}", timeout=10).status_code == 200
        assert not jsonl.exists()
        gateway.process.send_signal(signal.SIGTERM)
        assert gateway.process.wait(timeout=30) == -signal.SIGTERM  # uvicorn's re-raise: no atexit
    servers = [span for span in map(orjson.loads, jsonl.read_bytes().splitlines()) if span["kind"] == 2]
    assert len(servers) == 3
