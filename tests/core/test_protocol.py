"""The server's protocol work (_core/_protocol.py): a protocol callback that
parses a request and starts its task is timed into that request's
``protocol`` stage, outside its wall time, counted once as CPU."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._guard import internal_error_counts
from litellm_perfkit._core._protocol import parsing
from litellm_perfkit._export._spans import reconcile
from litellm_perfkit._export._split import time_split
from litellm_perfkit._litellm._wrap import _uvicorn_request
from litellm_perfkit._wire._environment_variables import PERFKIT_STEPS
from litellm_perfkit._wire._names import PROTOCOL_STAGE
from tests.core.test_after import _respond
from tests.support.asgi import http_scope
from tests.support.capture import Captured
from tests.support.clock import FakeClock

MS = 1_000_000


class _Cycle:
    def __init__(self) -> None:
        self.response_complete = False
        self.body = asyncio.Event()


class _Protocol:
    """uvicorn's shape: ``data_received`` parses; a request's head makes its
    cycle and starts its task there, a later read hands it its body."""

    def __init__(self, backend: Backend, clock: FakeClock, app_cpu_ms: float) -> None:
        self.cycle: _Cycle | None = None
        self.backend, self.clock, self.app_cpu_ms = backend, clock, app_cpu_ms
        self.tasks: list[asyncio.Task[None]] = []

    def data_received(self, data: bytes) -> None:
        kind, ms = data.split(b":")
        self.clock.advance_ms(float(ms))
        if kind == b"head":
            cycle = self.cycle = _Cycle()
            self.tasks.append(asyncio.get_running_loop().create_task(self._serve(cycle)))
        elif kind == b"body" and self.cycle is not None:
            self.cycle.body.set()

    async def _serve(self, cycle: _Cycle) -> None:
        scope = http_scope()

        async def receive() -> dict[str, Any]:
            await cycle.body.wait()
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await receive()
            self.clock.advance_ms(self.app_cpu_ms)
            await _respond(send)
            cycle.response_complete = True

        async def send(message: dict[str, Any]) -> None:
            return None

        await self.backend.middleware(app, steps="on")(scope, receive, send)


_UNTIMED = _Protocol.data_received
_Protocol.data_received = parsing(_UNTIMED, _uvicorn_request)  # type: ignore[method-assign,assignment]


def _run(backend: Backend, clock: FakeClock, *reads: bytes, protocol_class: type[_Protocol] = _Protocol) -> None:
    async def main() -> None:
        protocol = protocol_class(backend, clock, app_cpu_ms=0.5)
        for data in reads:
            protocol.data_received(data)
            await asyncio.sleep(0)  # the loop runs what the read started
            await asyncio.sleep(0)
        await asyncio.gather(*protocol.tasks)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(main())
    loop.close()


def test_the_parsing_before_the_app_and_of_the_body_is_the_requests_protocol_stage(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    _run(backend, clock, b"head:2", b"body:1", b"trailing:4")  # the last read comes after the response: nobody's
    [record] = records
    [protocol] = [stage for stage in record.stages if stage.name == PROTOCOL_STAGE]
    assert record.stages[0] is protocol and protocol.parent == -1
    assert (
        protocol.kind == "thread"
        and protocol.items == 2
        and protocol.self_ns == 3 * MS
        and protocol.duration_ns == 3 * MS
    )
    assert protocol.start_ns < record.start_ns  # its head was parsed before the app saw the request
    split = time_split(record)
    assert split is not None
    assert split.stages[0] == (3 * MS, 0, 0, 0)
    # For the request itself the body read was waiting: its CPU is the app's 0.5 ms, the protocol's is counted once.
    assert split.request.cpu_ns == MS // 2
    # The stage is no part of the overhead. From the fake clock: the app saw
    # the request for its body read (1 ms) and its own work (0.5 ms), none of
    # it in a stage; the protocol's 3 ms, if counted, would show as attributed.
    assert reconcile(record) == (int(1.5 * MS), 0, 0, int(1.5 * MS))


def test_with_the_thread_cpu_clock_the_parsing_counts_its_cpu_not_its_wall_time(
    backend: Backend, records: Captured, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PERFKIT_STEPS=cpu``: 3 ms on the (fake) wall clock, as a preempted
    callback takes, with next to no CPU on the thread's clock: the stage's
    CPU is the thread's, the rest of its wall time is not CPU."""
    monkeypatch.setenv(PERFKIT_STEPS, "cpu")

    class Preempted(_Protocol):
        data_received = parsing(_UNTIMED, _uvicorn_request)  # type: ignore[assignment]

    _run(backend, clock, b"head:2", b"body:1", protocol_class=Preempted)
    [record] = records
    [protocol] = [stage for stage in record.stages if stage.name == PROTOCOL_STAGE]
    assert protocol.duration_ns == 3 * MS and protocol.self_ns < MS // 2
    split = time_split(record)
    assert split is not None and split.stages[0].cpu_ns == protocol.self_ns


def test_each_request_on_a_connection_gets_its_own_parsing(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    _run(backend, clock, b"head:2", b"body:1", b"head:3", b"body:1")
    assert sorted(next(s.self_ns for s in r.stages if s.name == PROTOCOL_STAGE) for r in records) == [3 * MS, 4 * MS]


def test_a_protocol_perfkit_cannot_read_is_served_untouched() -> None:
    class Broken:
        @property
        def cycle(self) -> Any:
            raise RuntimeError("not uvicorn")

    seen = []
    before = internal_error_counts().get("protocol.before", 0)
    parsing(lambda protocol, data: seen.append(data), lambda protocol: protocol.cycle)(Broken(), b"x")
    assert seen == [b"x"] and internal_error_counts()["protocol.before"] == before + 1
