from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
import uvloop

from litellm_perfkit._core._backend import Backend
from tests.support import backends
from tests.support.capture import Captured, capture_records
from tests.support.clock import FakeClock, installed


@pytest.fixture(params=backends.NAMES)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each core test runs on the C accelerator and on the pure-Python path."""
    return backends.load(request.param)


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    """The fake clock in the request path (tests/support/clock.py)."""
    with installed() as clock:
        yield clock


@pytest.fixture
def records() -> Iterator[Captured]:
    """The records the middleware hands off while the test runs."""
    with capture_records() as records:
        yield records


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


@pytest.fixture(params=sorted(LOOPS))
def loop(request: pytest.FixtureRequest) -> Iterator[asyncio.AbstractEventLoop]:
    """A fresh event loop of each kind a host may run: asyncio's own and uvloop."""
    loop = LOOPS[request.param]()
    yield loop
    loop.close()
