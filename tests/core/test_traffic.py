"""The traffic tally: every request counted once, recorded or not; C's Tally
and Passage against the Python reference (_core/_traffic.py)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from litellm_perfkit._core import _sink
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._layouts import BOUNDARIES_NS, TRAFFIC_HEAD_COUNTS
from litellm_perfkit._core._traffic import (
    INCOMPLETE_RESPONSE,
    KNOWN_METHODS,
    OTHER,
    UNMATCHED_ROUTE,
    _PyTally,
    counts_size,
)
from litellm_perfkit.types import Message
from tests.support import backends
from tests.support.asgi import http_scope, keeping, no_body
from tests.support.clock import FakeClock, installed

ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
BUCKETS = len(BOUNDARIES_NS) + 1


def c_tally(max_series: int = 2000) -> Any:
    return backends.load("c").speedups.Tally(KNOWN_METHODS, OTHER, UNMATCHED_ROUTE, INCOMPLETE_RESPONSE, max_series)


@pytest.fixture(params=backends.NAMES)
def backend(request: pytest.FixtureRequest) -> Backend:
    loaded = backends.load(request.param)
    loaded.tally.clear()
    return loaded


def random_adds(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    methods = ["GET", "POST", "BREW", "get", "PATCH"]
    routes = ["/v1/chat/completions", "/items/{id}", UNMATCHED_ROUTE, "/é"]
    errors = ["", "ValueError", INCOMPLETE_RESPONSE]
    values = [0, 1, *BOUNDARIES_NS, *(b + 1 for b in BOUNDARIES_NS), 10**12, -5]
    return [
        (
            rng.choice(methods),
            rng.choice(routes),
            rng.choice([200, 401, 500, 0]),
            rng.choice(errors),
            rng.random() < 0.5,
            rng.random() < 0.5,
            rng.choice(values) if rng.random() < 0.5 else rng.randrange(10**10),
            rng.choice([-1, *values]),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("max_series", [2000, 5])
def test_c_tally_adds_as_the_python_reference(max_series: int) -> None:
    rng = random.Random(31)
    python, c = _PyTally(max_series), c_tally(max_series)
    for args in random_adds(rng, 3000):
        python.add(*args)
        c.add(*args)
    assert c.series() == python.series()
    assert c.requests == python.requests == 3000
    assert len(python.series()) <= max_series + 4  # the cap, plus one folded series per (streaming, recorded)


def test_c_tally_adds_a_recorded_timeline_as_the_python_reference() -> None:
    """``add_recorded`` reads the timeline's fields (C's straight from the C timeline's struct): the
    route's template from the scope, a client that went away as an incomplete response, the first
    token's mark as TTFT."""
    python, c = _PyTally(), c_tally()
    route = type("Route", (), {"path": "/v1/chat/completions"})()
    cases = [
        ("POST", 200, None, False, None, {"route": route}),
        ("POST", 200, "client_disconnected", True, 7_000, {"route": route}),
        ("BREW", 500, "ValueError", True, None, {}),
        ("GET", 401, None, False, None, {"route": None}),
    ]
    for method, status, error, streaming, first_token, scope in cases:
        for tally, name in [(python, "python"), (c, "c")]:
            timeline = backends.load(name).timeline(1_000, method, "/raw/path")
            timeline.status, timeline.error, timeline.streaming, timeline.end_ns = status, error, streaming, 51_000
            if first_token is not None:
                timeline.marks["first_token"] = 1_000 + first_token
            tally.add_recorded(timeline, scope)
    assert c.series() == python.series() and c.requests == python.requests == 4
    keys = [key for key, _ in c.series()]
    assert keys[1] == ("POST", "/v1/chat/completions", 200, INCOMPLETE_RESPONSE, True, True)
    assert keys[2][:4] == (OTHER, UNMATCHED_ROUTE, 500, "ValueError")
    assert c.series()[1][1][:8] == (1, 50_000, 50_000, 50_000, 1, 7_000, 7_000, 7_000)


def test_a_series_holds_count_sum_min_max_and_buckets_of_duration_and_ttft() -> None:
    tally = _PyTally()
    tally.add("POST", "/v1/chat/completions", 200, "", True, False, 30_000_000, 8_000_000)
    tally.add("POST", "/v1/chat/completions", 200, "", True, False, 60_000_000, -1)  # no first token
    [(key, counts)] = tally.series()
    assert key == ("POST", "/v1/chat/completions", 200, "", True, False)
    assert len(counts) == counts_size() == TRAFFIC_HEAD_COUNTS + 2 * BUCKETS
    assert counts[:8] == (2, 90_000_000, 30_000_000, 60_000_000, 1, 8_000_000, 8_000_000, 8_000_000)
    durations = counts[8 : 8 + BUCKETS]
    ttfts = counts[8 + BUCKETS :]
    # (25, 50] ms and (50, 75] ms; the TTFT's (5, 10] ms
    assert durations[BOUNDARIES_NS.index(50_000_000)] == durations[BOUNDARIES_NS.index(75_000_000)] == 1
    assert ttfts[BOUNDARIES_NS.index(10_000_000)] == 1 and sum(durations) == 2 and sum(ttfts) == 1


def test_labels_stay_bounded_whatever_clients_send() -> None:
    tally = _PyTally(max_series=3)
    for n in range(10):
        tally.add(f"M{n}", f"/r{n}", 200, "", False, False, 1, -1)  # methods outside HTTP's: _OTHER
    keys = [key for key, _ in tally.series()]
    assert keys[0] == (OTHER, "/r0", 200, "", False, False)
    assert keys[-1] == (OTHER, OTHER, 0, OTHER, False, False)  # past the cap: one series
    assert len(keys) == 4 and sum(counts[0] for _, counts in tally.series()) == 10


# -- requests through the middleware, time moved by hand ----------------------


def make_app(clock: FakeClock, kind: str) -> Any:
    """An app whose every step takes a known time on the fake clock."""

    class Route:
        path = "/v1/chat/completions"

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope["route"] = Route() if kind != "unmatched" else None
        clock.advance_ms(3)
        if kind == "raises":
            raise KeyError("boom")
        stream = kind == "stream"
        content_type = b"text/event-stream" if stream else b"application/json"
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", content_type)]})
        clock.advance_ms(4)
        if stream:
            await send({"type": "http.response.body", "body": ROLE, "more_body": True})
            clock.advance_ms(5)
            await send({"type": "http.response.body", "body": memoryview(TOKEN), "more_body": True})
            clock.advance_ms(6)
        if kind != "incomplete":
            await send({"type": "http.response.body", "body": b"{}"})
        if kind == "after":
            clock.advance_ms(20)  # the app's work after its last byte: no part of the request's duration

    return app


async def serve(middleware: Any, method: str = "POST") -> list[Message]:
    sent, send = keeping()
    scope = http_scope(method, "/v1/chat/completions?raw", client=("10.0.0.1", 5), server=("127.0.0.1", 80))
    try:
        await middleware(scope, no_body, send)
    except KeyError:
        pass
    return sent


KINDS = ["json", "after", "stream", "raises", "incomplete", "unmatched"]


def served(backend: Backend, recorded: bool) -> list[tuple[Any, tuple[int, ...]]]:
    backend.tally.clear()
    _sink.set_sink(None)
    with installed() as clock:
        for kind in KINDS:
            rate: Any = "all" if recorded else 1e-9
            middleware = backend.middleware(make_app(clock, kind), record_rate=rate, record_ratio=1.0, steps="off")
            if not recorded:
                middleware._record_choice._pace._due_ns = 10**18  # type: ignore[union-attr]  # the cap is used up
            asyncio.run(serve(middleware, "BREW" if kind == "unmatched" else "POST"))
    return backend.tally.series()


@pytest.mark.parametrize("recorded", [False, True], ids=["unrecorded", "recorded"])
def test_each_request_is_counted_once_with_its_labels_and_times(backend: Backend, recorded: bool) -> None:
    series = {key[:5]: (key[5], counts) for key, counts in served(backend, recorded)}
    assert all(flag is recorded for flag, _ in series.values())
    route = "/v1/chat/completions"
    assert set(series) == {
        ("POST", route, 201, "", False),
        ("POST", route, 201, "", True),
        ("POST", route, 0, "KeyError", False),  # raised before any response
        ("POST", route, 201, INCOMPLETE_RESPONSE, False),
        (OTHER, UNMATCHED_ROUTE, 201, "", False),  # never the raw path
    }
    json_counts = series[("POST", route, 201, "", False)][1]  # json and after: each ends at its last byte
    assert json_counts[:5] == (2, 14_000_000, 7_000_000, 7_000_000, 0)
    stream = series[("POST", route, 201, "", True)][1]
    # 3 + 4 + 5 + 6 ms; the first content token (not the role chunk) at 3 + 4 + 5 ms
    assert stream[:8] == (1, 18_000_000, 18_000_000, 18_000_000, 1, 12_000_000, 12_000_000, 12_000_000)
    assert series[("POST", route, 0, "KeyError", False)][1][:2] == (1, 3_000_000)


def test_the_c_path_counts_as_the_python_one() -> None:
    for recorded in (False, True):
        python = served(backends.load("python"), recorded)
        assert served(backends.load("c"), recorded) == python


def test_a_recorded_and_an_unrecorded_request_give_the_same_figures(backend: Backend) -> None:
    unrecorded = [(key[:5], counts) for key, counts in served(backend, False)]
    recorded = [(key[:5], counts) for key, counts in served(backend, True)]
    assert unrecorded == recorded


def test_the_app_gets_every_message_unchanged_through_the_passage(backend: Backend) -> None:
    with installed() as clock:
        middleware = backend.middleware(make_app(clock, "stream"), record_ratio=0.0, steps="off")
        sent = asyncio.run(serve(middleware))
    assert [m["type"] for m in sent] == ["http.response.start"] + ["http.response.body"] * 3
    assert sent[0]["headers"] == [(b"content-type", b"text/event-stream")]  # no perfkit header: not recorded
    assert bytes(sent[2]["body"]) == TOKEN


def test_the_passage_and_its_send_pass_and_count_alike(backend: Backend) -> None:
    """The middleware hands the app ``passage.send`` (C: a bound builtin
    method, which CPython calls faster); calling the passage is the same."""
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    bodies = [{"type": "http.response.body", "body": b, "more_body": True} for b in (ROLE, TOKEN, TOKEN)]
    last = {"type": "http.response.body", "body": b"", "more_body": False}
    messages = [start, *bodies, last]

    def counted(by_send: bool) -> list[Any]:
        backend.tally.clear()
        sent: list[Message] = []

        async def server_send(message: Message) -> None:
            sent.append(message)

        async def run(passage: Any) -> None:
            call = passage.send if by_send else passage
            for message in messages:
                assert await call(message) is None

        with installed() as clock:
            passage = backend.tally.passage("GET", server_send)
            clock.advance_ms(1)
            asyncio.run(run(passage))
            passage.close(http_scope("GET", "/x"), None)
        assert len(sent) == len(messages) and all(a is b for a, b in zip(sent, messages))
        return backend.tally.series()

    results = [counted(False), counted(True)]
    assert results[0] == results[1]
    ((key, counts),) = results[1]
    assert key == ("GET", UNMATCHED_ROUTE, 200, "", True, False) and counts[0] == 1 and counts[4] == 1


def test_a_message_the_passage_cannot_read_is_passed_on_and_the_error_counted(backend: Backend) -> None:
    from litellm_perfkit._core._guard import internal_error_counts

    odd = {"type": "http.response.start", "status": "two hundred", "headers": []}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(odd)
        await send({"type": "http.response.body", "body": b"ok"})

    before = internal_error_counts().get("middleware.passage", 0)
    sent = asyncio.run(serve(backend.middleware(app, record_ratio=0.0, steps="off")))
    assert sent[0] is odd and len(sent) == 2
    assert internal_error_counts().get("middleware.passage", 0) == before + 1


def test_a_tally_that_fails_leaves_the_request_served_and_the_error_counted(backend: Backend) -> None:
    from litellm_perfkit._core._guard import internal_error_counts

    class Broken:
        def passage(self, method: str, send: Any) -> Any:
            raise RuntimeError("perfkit's bug")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sent, send = keeping()
    middleware = backend.middleware(app, record_ratio=0.0)
    middleware._tally = Broken()  # type: ignore[assignment]
    before = internal_error_counts().get("middleware.tally", 0)
    asyncio.run(middleware(http_scope("GET", "/", client=("10.0.0.1", 1)), no_body, send))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"] and sent[1]["body"] == b"ok"
    assert internal_error_counts().get("middleware.tally", 0) == before + 1
