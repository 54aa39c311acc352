from __future__ import annotations

import pytest

from litellm_perfkit._core._backend import Backend
from tests.support import backends


@pytest.fixture(params=backends.NAMES)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each core test runs on the C accelerator and on the pure-Python path."""
    return backends.load(request.param)
