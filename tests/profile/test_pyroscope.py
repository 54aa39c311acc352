"""pyroscope-io pushes to an ingest receiver on 127.0.0.1, with perfkit's tags.

Twice: with the pyroscope-io pip picks for perfkit alone (1.x, connect
protobuf), and with the one LiteLLM pins (0.8.16, ``/ingest``), because
users install perfkit beside the proxy.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from litellm_perfkit import __version__
from tests.support.litellm_env import litellm_env, litellm_python
from tests.support.pprof import pyroscope_pushes
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


@pytest.mark.parametrize(
    "beside",
    ["perfkit alone", pytest.param("litellm 1.103.0", marks=[pytest.mark.integration, pytest.mark.litellm])],
)
def test_pyroscope_pushes_with_perfkit_tags(beside: str) -> None:
    python, env = (
        (sys.executable, dict(os.environ))
        if beside == "perfkit alone"
        else (str(litellm_python("1.103.0")), litellm_env())
    )
    with otlp_receiver() as (url, received):  # any POST receiver: it keeps each body by path and query
        env.update(PERFKIT_PYROSCOPE_URL=url, OTEL_SERVICE_NAME="perfkit-pyroscope-test")
        result = subprocess.run([python, "-c", BURN], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    pushes = pyroscope_pushes(received.bodies)
    assert pushes, "nothing was pushed"
    labels, strings = pushes[0]
    assert labels["__app__"] == {"perfkit-pyroscope-test"}
    assert labels["service_name"] == {"perfkit-pyroscope-test"}
    assert labels["perfkit_version"] == {__version__}
    assert "pid" in labels and "host" in labels
    if beside != "perfkit alone":
        assert labels["litellm_version"] == {"1.103.0"}
    assert any("burn_for_pyroscope" in s for p in pushes for s in p[1])  # the profile itself, not only its tags
