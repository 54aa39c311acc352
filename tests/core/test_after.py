"""Work a request starts that outlives its response (_core/_after.py): its
hand-off waits for the tasks, and their time after the response is the
``after_response`` stage, outside the request's wall time."""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import gc
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from litellm_perfkit._core import _after
from litellm_perfkit._core._after import expect
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._timeline import current_timeline
from litellm_perfkit._export._spans import reconcile
from litellm_perfkit._export._split import time_split
from litellm_perfkit._wire._names import AFTER_RESPONSE_STAGE
from litellm_perfkit.types import RequestRecord
from tests.support.asgi import discard, http_scope, one_body
from tests.support.capture import Captured
from tests.support.clock import FakeClock

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def _serve(
    backend: Backend, app: App, loop: asyncio.AbstractEventLoop, then: Callable[[], Awaitable[None]] | None = None
) -> None:
    """One request through the middleware, then ``then`` on the same loop (the tasks left running go on)."""

    async def main() -> None:
        await backend.middleware(app, steps="on")(http_scope(), one_body, discard)
        if then is not None:
            await then()

    loop.run_until_complete(main())


def _served(backend: Backend, app: App, then: Callable[[], Awaitable[None]] | None = None) -> None:
    """``_serve`` on a loop of its own, closed after."""
    loop = asyncio.new_event_loop()
    _serve(backend, app, loop, then)
    loop.close()


async def _respond(send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    """Wait on the running loop until ``condition`` holds (the loop runs meanwhile); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.001)


def _logging(work: Callable[[], Awaitable[None]]) -> tuple[asyncio.Event, Callable[[], Awaitable[None]]]:
    """A task like the host's logging, started by a request: it lets the response end, runs
    ``work``, then sets the event it returns with it."""
    done = asyncio.Event()

    async def log() -> None:
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the response ends meanwhile
        await work()
        done.set()

    return done, log


def _after_response(record: RequestRecord) -> int:
    return sum(1 for stage in record.stages if stage.name == AFTER_RESPONSE_STAGE)


def test_a_request_without_tasks_is_handed_off_when_it_ends(backend: Backend, records: Captured) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await _respond(send)

    _served(backend, app)
    [record] = records
    assert _after_response(record) == 0


def test_a_task_that_outlives_the_response_holds_the_hand_off_and_is_the_after_response_stage(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    async def cost() -> None:
        clock.advance_ms(3)  # the logging's CPU, after the response

    done, log = _logging(cost)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        clock.advance_ms(1)
        asyncio.get_running_loop().create_task(log())
        await _respond(send)

    async def then() -> None:
        assert records == []  # held while the task runs
        await done.wait()  # the task's last step released it

    _served(backend, app, then)
    [record] = records
    [after] = [stage for stage in record.stages if stage.name == AFTER_RESPONSE_STAGE]
    assert after.start_ns == record.end_ns and after.end_ns >= record.end_ns + 3_000_000
    split = time_split(record)
    assert split is not None
    position = record.stages.index(after)
    assert split.stages[position].cpu_ns == 3_000_000
    assert split.request.cpu_ns == 1_000_000  # the request's own window: the app's 1 ms
    total, upstream, attributed, unattributed = reconcile(record)
    assert attributed == 0 and total == record.duration_ns  # outside the request's wall time


def _held_until(forever: asyncio.Event) -> App:
    """An app whose every request starts a task that waits for ``forever``."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asyncio.get_running_loop().create_task(forever.wait())
        await _respond(send)

    return app


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, App]:
    """An app whose requests are each held by a task that waits for the event, with a short ``WAIT_S``."""
    monkeypatch.setattr(_after, "WAIT_S", 0.05)
    forever = asyncio.Event()
    return forever, _held_until(forever)


def test_a_task_that_never_ends_is_waited_for_at_most_wait_s(
    backend: Backend, records: Captured, held: tuple[asyncio.Event, App]
) -> None:
    forever, app = held

    async def then() -> None:
        await _until(lambda: len(records) == 1)  # handed off at the deadline, the task still waiting
        forever.set()
        await asyncio.sleep(0)

    _served(backend, app, then)
    assert len(records) == 1


def test_a_coroutine_queued_for_a_worker_holds_the_request_until_its_task_ends(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    finished, responded = asyncio.Event(), asyncio.Event()

    async def log() -> None:
        assert current_timeline() is not None  # the worker starts it in the request's context
        clock.advance_ms(2)
        finished.set()

    async def worker() -> None:
        coroutine, context = await queue.get()
        await responded.wait()  # the queue lags behind the response
        context.run(asyncio.get_running_loop().create_task, coroutine)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        import contextvars

        coroutine = log()
        expect(current_timeline(), coroutine)  # what the LiteLLM instrumentation does at the queue
        queue.put_nowait((coroutine, contextvars.copy_context()))
        await _respond(send)
        responded.set()

    async def then() -> None:
        assert records == []
        await finished.wait()
        await asyncio.sleep(0)

    loop = asyncio.new_event_loop()
    loop.create_task(worker())  # started outside any request
    _serve(backend, app, loop, then)
    loop.close()
    [record] = records
    [after] = [stage for stage in record.stages if stage.name == AFTER_RESPONSE_STAGE]
    split = time_split(record)
    assert split is not None and split.stages[record.stages.index(after)].cpu_ns == 2_000_000


def test_only_a_native_coroutine_is_expected_and_it_is_claimed_once(backend: Backend) -> None:
    """A queued native coroutine is keyed by itself (it hashes by identity: no int per queued coroutine);
    an awaitable of another type hashes and compares by its own code, so it is never held."""

    class Foreign(collections.abc.Coroutine):  # type: ignore[type-arg]
        def __hash__(self) -> int:
            raise AssertionError("perfkit hashed an awaitable that is not a native coroutine")

        def send(self, value: Any) -> Any:
            raise StopIteration

        def throw(self, *args: Any) -> Any:
            raise StopIteration

        def __await__(self) -> Any:
            return iter(())

    async def queued() -> None:
        pass

    timeline = backend.timeline(0, "POST", "/x")
    foreign, coroutine = Foreign(), queued()
    expect(timeline, foreign)
    assert timeline.held_tasks == 0 and _after.claim(foreign) is None
    expect(timeline, coroutine)
    assert timeline.held_tasks == 1
    assert _after.claim(coroutine) is timeline and _after.claim(coroutine) is None
    coroutine.close()


def test_a_requests_tasks_queue_no_callback_and_release_it_as_they_finish(backend: Backend, records: Captured) -> None:
    """A callback per task would be one more object living as long as the task, and its run one more
    turn of the loop (docs/overhead.md): each task's coroutine releases its request as it finishes."""
    tasks: list[asyncio.Task[None]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        loop = asyncio.get_running_loop()
        tasks.extend(loop.create_task(asyncio.sleep(0)) for _ in range(3))
        assert all(not task._callbacks for task in tasks)  # type: ignore[attr-defined]
        timeline = current_timeline()
        assert timeline is not None and timeline.held_tasks == 3
        await asyncio.gather(*tasks)
        assert timeline.held_tasks == 0  # all three released before the response ends
        await _respond(send)

    _served(backend, app)
    assert len(records) == 1 and _after_response(records[0]) == 0


def _serve_with_a_task_that_never_ends_a_step(
    backend: Backend,
    records: Captured,
    start: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any]],
    loop: asyncio.AbstractEventLoop | None = None,
) -> None:
    """One request that starts a task (``start``) whose coroutine never runs to its end, awaits it and
    responds. The C clock releases the request: it is handed off with its response; the pure-Python
    path's waits for the deadline (the ``held`` fixture's 0.05 s)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        task = start(asyncio.get_running_loop())
        with contextlib.suppress(BaseException):
            await task
        del task
        for _ in range(2):  # the loop lets go of the task
            await asyncio.sleep(0)
        gc.collect()  # the task, its coroutines and the exception's traceback hold each other
        await _respond(send)

    async def then() -> None:
        if backend.name == "c":
            assert len(records) == 1
        await _until(lambda: len(records) == 1)

    if loop is None:
        _served(backend, app, then)
    else:
        _serve(backend, app, loop, then)
    assert len(records) == 1 and not _after._held


@pytest.mark.parametrize("how", ["cancel", "close"])
@pytest.mark.filterwarnings("ignore:coroutine 'sleep' was never awaited")  # the Python path's close leaves it
def test_a_task_that_never_takes_a_step_releases_its_request(
    backend: Backend, records: Captured, held: tuple[asyncio.Event, App], how: str
) -> None:
    """Cancelled (or its coroutine closed) before its first step: the C clock, the task's coroutine,
    sees it and releases at once; the pure-Python path's native wrapper never runs, so its request
    waits for the deadline (``WAIT_S``, 0.05 s here)."""

    def start(loop: asyncio.AbstractEventLoop) -> asyncio.Task[Any]:
        task = loop.create_task(asyncio.sleep(10))
        if how == "cancel":
            task.cancel()
        else:
            task.get_coro().close()
        return task

    _serve_with_a_task_that_never_ends_a_step(backend, records, start)


def test_held_requests_share_one_sweep_per_loop(
    backend: Backend, records: Captured, held: tuple[asyncio.Event, App]
) -> None:
    forever, app = held

    async def then() -> None:
        loop = asyncio.get_running_loop()
        for _ in range(4):  # four more requests, each held by a task that never ends
            await backend.middleware(app, steps="on")(http_scope(path="/"), one_body, discard)
        assert list(_after._sweeps.values()) == [loop]  # one sweep queued for all five
        await _until(lambda: len(records) == 5)  # each handed off at its deadline
        assert not _after._sweeps  # nothing left queued
        forever.set()
        await asyncio.sleep(0)

    _served(backend, app, then)
    assert len(records) == 5


def test_a_request_held_on_a_loop_that_closed_is_handed_off_with_the_next_sweep(
    backend: Backend, records: Captured
) -> None:
    """A loop closed before its sweep ran: its held requests are not lost, and nothing keeps them."""
    first = asyncio.new_event_loop()
    _serve(backend, _held_until(asyncio.Event()), first)
    first.close()  # the task never ends, the sweep never runs
    assert len(records) == 0 and [held.loop for held in _after._held.values()] == [first]
    second = asyncio.new_event_loop()
    ends = asyncio.Event()

    async def then() -> None:  # the first request went when this one's hand-off queued a sweep
        assert len(records) == 1 and [held.loop for held in _after._held.values()] == [second]
        ends.set()
        await asyncio.sleep(0)

    _serve(backend, _held_until(ends), second, then)
    second.close()
    assert len(records) == 2 and not _after._held


def test_a_task_of_a_host_factory_that_wraps_it_never_stepped_releases_its_request(
    backend: Backend, records: Captured, held: tuple[asyncio.Event, App]
) -> None:
    """The host's own task factory (set before perfkit's, which then sits outside it) wraps each coroutine
    in one of its own; a task cancelled before its first step never reaches perfkit's clock. The C clock,
    freed unfinished, releases its request; the pure-Python path's waits for the deadline."""

    def host_factory(loop: asyncio.AbstractEventLoop, coroutine: Any, **kwargs: Any) -> asyncio.Task[Any]:
        async def wrapper() -> Any:
            return await coroutine

        return asyncio.Task(wrapper(), loop=loop, **kwargs)

    def start(loop: asyncio.AbstractEventLoop) -> asyncio.Task[Any]:
        task = loop.create_task(asyncio.sleep(10))
        task.cancel()
        return task

    loop = asyncio.new_event_loop()
    loop.set_task_factory(host_factory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the wrapper's coroutine never awaited its own
        _serve_with_a_task_that_never_ends_a_step(backend, records, start, loop)
    loop.close()


class _NoIterator(collections.abc.Coroutine[Any, Any, None]):
    """A coroutine to asyncio (a registered ``Coroutine``) whose ``__await__`` fails: its task fails at its
    first step, before anything runs."""

    def send(self, value: Any) -> Any:
        raise StopIteration

    def throw(self, *args: Any) -> Any:
        raise StopIteration

    def close(self) -> None:
        pass

    def __await__(self) -> Any:
        raise TypeError("no iterator")


def test_a_task_whose_coroutine_cannot_be_awaited_releases_its_request(
    backend: Backend, records: Captured, held: tuple[asyncio.Event, App]
) -> None:
    _serve_with_a_task_that_never_ends_a_step(backend, records, lambda loop: loop.create_task(_NoIterator()))


def test_a_task_closing_its_own_coroutine_keeps_its_hold_until_it_ends(
    backend: Backend, records: Captured, clock: FakeClock
) -> None:
    """Refused (the coroutine is running): the task goes on, and its later steps still hold the request."""
    refused: list[str] = []

    async def log() -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            task.get_coro().close()
        except (RuntimeError, ValueError) as exc:
            refused.append(type(exc).__name__)
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the response ends meanwhile
        clock.advance_ms(3)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asyncio.get_running_loop().create_task(log())
        await _respond(send)

    async def then() -> None:
        assert records == []  # still held
        await _until(lambda: len(records) == 1)

    _served(backend, app, then)
    [record] = records
    assert refused and _after_response(record) == 1
