"""pyroscope-io pushes to an ingest receiver on 127.0.0.1, with perfkit's tags."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import parse_qs, urlsplit

from litellm_perfkit import __version__
from tests.support.pprof import labels_and_strings
from tests.support.receiver import otlp_receiver

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


def test_pyroscope_pushes_with_perfkit_tags() -> None:
    with otlp_receiver() as (url, received):  # any POST receiver: it keeps each body by path and query
        env = {**os.environ, "PERFKIT_PYROSCOPE_URL": url, "OTEL_SERVICE_NAME": "perfkit-pyroscope-test"}
        result = subprocess.run([sys.executable, "-c", BURN], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    pushes = [(path, body) for path, bodies in received.bodies.items() for body in bodies]
    assert pushes, "nothing was pushed"
    path, body = pushes[0]
    parts = urlsplit(path)
    assert parts.path == "/ingest"
    query = parse_qs(parts.query)
    assert query["name"] == ["perfkit-pyroscope-test"] and query["format"] == ["pprof"]
    labels, strings = labels_and_strings(body)
    assert labels["service_name"] == {"perfkit-pyroscope-test"}
    assert labels["perfkit_version"] == {__version__}
    assert "pid" in labels and "host" in labels
    assert "burn_for_pyroscope" in strings  # the profile itself, not only its tags
