"""A request ends at its response's last byte: the app's time after it, to
its return (its code after the last ``send``), is its own part,
``after_last_byte_ns`` (``perfkit.after_last_byte_ms``), outside the
request's wall time. Ground truth: an app that sends its whole response,
then works a known time before it returns."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from litellm_perfkit._core._backend import Backend
from litellm_perfkit._export._spans import reconcile, record_to_spans
from litellm_perfkit._export._split import time_split
from litellm_perfkit._wire._names import AFTER_RESPONSE_STAGE, Attr
from litellm_perfkit.types import RequestRecord
from tests.support.asgi import http_scope, one_body
from tests.support.capture import Captured, capture_records
from tests.support.clock import FakeClock
from tests.support.servers import uvicorn_server

MS = 1_000_000
AFTER_MS = 20


def _serve(backend: Backend, app: Any, clock: FakeClock) -> int:
    """One request through the middleware on a loop of its own; the time
    its client had the last byte, after the request was received (the
    middleware called)."""
    received: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            received.append(clock())

    async def main() -> None:
        called = clock()
        await backend.middleware(app, steps="on")(http_scope(), one_body, send)
        received[:] = [at - called for at in received]

    asyncio.run(main())
    return received[0] if received else -1


def _attributes(record: RequestRecord) -> dict[str, Any]:
    return dict(record_to_spans(record, "0" * 32, "", 0)[0].attributes)


def test_the_request_ends_at_its_last_byte_and_the_apps_time_after_it_is_its_own_part(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        with backend.stage("handler"):  # around the whole app, like the framework's stages
            clock.advance_ms(1)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            clock.advance_ms(2)
            await send({"type": "http.response.body", "body": b"{}"})
            clock.advance_ms(AFTER_MS / 2)  # the app's work after the response: a stage of its own too
            with backend.stage("cleanup"):
                clock.advance_ms(AFTER_MS / 2)

    client_ns = _serve(backend, app, clock)
    [record] = records
    assert record.duration_ns == client_ns == 3 * MS
    assert record.after_last_byte_ns == AFTER_MS * MS
    assert record.error is None
    attributes = _attributes(record)
    assert attributes[Attr.TOTAL_MS] == 3.0
    assert attributes[Attr.AFTER_LAST_BYTE_MS] == AFTER_MS
    # The app's code after its last byte ran in one step: its CPU, by the wall clock.
    assert attributes[Attr.AFTER_LAST_BYTE_CPU_MS] == AFTER_MS
    assert attributes[Attr.CPU_MS] + attributes[Attr.QUEUE_MS] + attributes[Attr.IO_MS] == 3.0
    # Only the stages' parts before the last byte reconcile with the total.
    total, upstream, attributed, unattributed = reconcile(record)
    assert (total, upstream, attributed, unattributed) == (3 * MS, 0, 3 * MS, 0)
    assert attributes[Attr.ATTRIBUTED_MS] == 3.0 and attributes[Attr.UNATTRIBUTED_MS] == 0.0
    # The stages themselves keep what they measured.
    handler, cleanup = record.stages
    assert handler.duration_ns == (3 + AFTER_MS) * MS and cleanup.duration_ns == AFTER_MS / 2 * MS
    split = time_split(record)
    assert split is not None and split.remainder.cpu_ns == 0


def test_a_request_with_no_last_byte_ends_when_the_app_returns(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    async def failing(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{", "more_body": True})
        clock.advance_ms(AFTER_MS)
        raise RuntimeError("no last byte")

    with pytest.raises(RuntimeError):
        _serve(backend, failing, clock)

    async def unfinished(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        clock.advance_ms(AFTER_MS)

    assert _serve(backend, unfinished, clock) == -1
    for record in records:
        assert record.duration_ns == AFTER_MS * MS and record.after_last_byte_ns == 0
        assert Attr.AFTER_LAST_BYTE_MS not in _attributes(record)
    assert [record.error for record in records] == ["RuntimeError", "incomplete_response"]


def test_an_app_that_raises_after_its_last_byte_ends_there(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        clock.advance_ms(1)
        await send({"type": "http.response.body", "body": b"{}"})
        clock.advance_ms(AFTER_MS)
        raise RuntimeError("after the response")

    with pytest.raises(RuntimeError):
        _serve(backend, app, clock)
    [record] = records
    assert record.duration_ns == MS and record.after_last_byte_ns == AFTER_MS * MS
    assert record.error == "RuntimeError"


def test_the_after_response_stage_starts_when_the_app_returns(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    done = asyncio.Event()

    async def log() -> None:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        clock.advance_ms(3)
        done.set()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asyncio.get_running_loop().create_task(log())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        clock.advance_ms(AFTER_MS)

    async def main() -> None:
        await backend.middleware(app, steps="on")(http_scope(), one_body, _discard)
        await done.wait()
        await asyncio.sleep(0)

    asyncio.run(main())
    [record] = records
    [after] = [stage for stage in record.stages if stage.name == AFTER_RESPONSE_STAGE]
    assert after.start_ns == record.end_ns + AFTER_MS * MS  # the two parts after the last byte do not overlap


async def _discard(message: dict[str, Any]) -> None:
    return None


def _sleeper(backend: Backend, spent: list[tuple[int, int]]) -> Any:
    """An app that sleeps, then burns, 20 ms each after its whole response;
    ``spent`` gets the app's own stamps around that."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})
        sent = time.perf_counter_ns()
        await asyncio.sleep(AFTER_MS / 1000)
        end = time.perf_counter() + AFTER_MS / 1000
        while time.perf_counter() < end:
            pass
        spent.append((sent, time.perf_counter_ns()))

    return backend.middleware(app)


@pytest.mark.quiet
@pytest.mark.integration
def test_ground_truth_the_total_is_what_the_client_waited_and_the_apps_time_after_reads_what_it_spent(
    backend: Backend,
) -> None:
    """Over a socket: the app's 2 x 20 ms after its whole response is no part
    of the total, which stays inside what the client saw."""
    client: list[int] = []
    spent: list[tuple[int, int]] = []
    with capture_records() as records, uvicorn_server(_sleeper(backend, spent)) as url, httpx.Client() as http:
        for n in range(1, 6):
            started = time.perf_counter_ns()
            response = http.post(f"{url}/done")
            client.append(time.perf_counter_ns() - started)
            assert response.status_code == 200
            deadline = time.monotonic() + 10
            while len(spent) < n and time.monotonic() < deadline:  # the next request waits for none of the app's 40 ms
                time.sleep(0.001)
        deadline = time.monotonic() + 10
        while len(records) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(records) == 5
    # And close to it: the client's own time around the request (its HTTP
    # client, the loopback, the server's parsing) is what is left; a loaded
    # machine delays a request or two (the first one also connects).
    waits = sorted(client_ns - record.duration_ns for record, client_ns in zip(records, client))
    assert waits[0] < 5 * MS, waits
    for record, client_ns, (sent, returned) in zip(records, client, spent):
        # The client had each response before the app's 40 ms after it: the total is inside the client's time.
        assert record.duration_ns <= client_ns
        # The app's time after its last byte: what it spent by its own stamps (uvloop's timer may fire up
        # to 1 ms early), and the middleware's few microseconds.
        assert (2 * AFTER_MS - 1) * MS <= returned - sent <= record.after_last_byte_ns <= returned - sent + 2 * MS
        assert record.end_ns <= sent and record.end_ns + record.after_last_byte_ns >= returned
        attributes = _attributes(record)
        assert attributes[Attr.TOTAL_MS] == record.duration_ns / 1e6
        assert attributes[Attr.AFTER_LAST_BYTE_MS] == record.after_last_byte_ns / 1e6
        # The burn's 20 ms ran in a step (its CPU, by the wall clock); the sleep did not.
        assert AFTER_MS <= attributes[Attr.AFTER_LAST_BYTE_CPU_MS] < attributes[Attr.AFTER_LAST_BYTE_MS] - AFTER_MS + 2
