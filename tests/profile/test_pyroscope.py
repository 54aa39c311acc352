"""pyroscope-io pushes to an ingest receiver on 127.0.0.1, with perfkit's tags."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from litellm_perfkit import __version__
from tests.support.pprof import labels_and_strings

BURN = """
import time
from litellm_perfkit._profile._setup import from_environment
from_environment(None)
def burn_for_pyroscope():
    end = time.time() + 3
    while time.time() < end:
        sum(range(1000))
burn_for_pyroscope()
import pyroscope
pyroscope.shutdown()
"""


@pytest.fixture()
def ingest() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    received: list[tuple[str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            received.append((self.path, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()


def test_pyroscope_pushes_with_perfkit_tags(ingest: tuple[str, list[tuple[str, bytes]]]) -> None:
    url, received = ingest
    env = {**os.environ, "PERFKIT_PYROSCOPE_URL": url, "OTEL_SERVICE_NAME": "perfkit-pyroscope-test"}
    result = subprocess.run([sys.executable, "-c", BURN], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert received, "nothing was pushed"
    path, body = received[0]
    parts = urlsplit(path)
    assert parts.path == "/ingest"
    query = parse_qs(parts.query)
    assert query["name"] == ["perfkit-pyroscope-test"] and query["format"] == ["pprof"]
    labels, strings = labels_and_strings(body)
    assert labels["service_name"] == {"perfkit-pyroscope-test"}
    assert labels["perfkit_version"] == {__version__}
    assert "pid" in labels and "host" in labels
    assert "burn_for_pyroscope" in strings  # the profile itself, not only its tags
