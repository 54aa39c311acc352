"""The test servers' own guards (tests/support/servers.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.support import servers


@pytest.mark.integration
def test_jaeger_starts_again_on_other_ports_when_one_was_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port free_port() found free can be taken before Jaeger binds it: a .ci/run lost a benchmark's
    smoke test to that ("address already in use")."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real = servers.free_port
    calls: list[int] = []

    def free_port() -> int:
        calls.append(1)
        return taken.getsockname()[1] if len(calls) == 5 else real()  # the first attempt's OTLP/HTTP port

    monkeypatch.setattr(servers, "free_port", free_port)
    with taken, servers.jaeger_process(tmp_path) as jaeger:
        assert len(calls) == 10  # a second attempt
        assert httpx.get(f"{jaeger.query}/api/services", timeout=5).status_code == 200
