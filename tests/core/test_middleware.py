from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import time
from typing import Any

import httpx
import pytest

from litellm_perfkit import OVERHEAD_HEADER
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._timeline import current_timeline
from litellm_perfkit._wire._headers import parse_server_timing
from tests.support import apps
from tests.support.asgi import discard, http_scope, keeping, no_body
from tests.support.capture import capture_records
from tests.support.no_collections import no_collections
from tests.support.servers import uvicorn_server


def wait_for(records: list[Any], n: int, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while len(records) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(records) >= n


def test_json_request_stages_headers_and_reconciliation(backend: Backend) -> None:
    with capture_records() as records, uvicorn_server(backend.middleware(apps.make_app(backend.stage))) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json={"messages": []})
        wait_for(records, 1)
    assert response.status_code == 200
    [record] = records
    names = [s.name for s in record.stages]
    assert names == ["request.parse", "auth", "upstream", "serialize"]
    assert all(s.duration_ns > 0 for s in record.stages)
    timing = dict(part.strip().split(";dur=") for part in response.headers["server-timing"].split(","))
    timing.pop("gc", None)  # a collection may land in any request (its own test is below)
    assert set(timing) == set(names)
    assert abs(float(timing["upstream"]) - record.stages[2].duration_ns / 1e6) < 0.002
    overhead = float(response.headers[OVERHEAD_HEADER])
    headers_at = record.marks["headers_sent"] - record.start_ns
    assert overhead == pytest.approx((headers_at - record.upstream_ns) / 1e6, abs=0.002)
    assert record.body_bytes == len(response.content)
    assert record.status == 200 and record.error is None and not record.streaming


def test_known_stream_ttft_chunks_and_bytes_are_exact(backend: Backend) -> None:
    with capture_records() as records, uvicorn_server(backend.middleware(apps.make_app(backend.stage))) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json={"stream": True})
        wait_for(records, 1)
    assert response.content == apps.ROLE + apps.TOKEN * apps.STREAM_CHUNKS + apps.DONE
    [record] = records
    assert record.streaming
    assert record.chunks == apps.STREAM_CHUNKS + 1  # role chunk + content chunks, [DONE] excluded
    assert record.body_bytes == apps.STREAM_BYTES
    # TTFT is the first content chunk, sent after the role chunk and the known delay.
    first_role = record.marks["first_body_byte"]
    gap_ms = (record.marks["first_token"] - first_role) / 1e6
    # Not the role chunk (that would be ~0 ms). uvloop timers may fire up to ~1 ms early.
    # No upper bound: a loaded host delays the token (61 ms seen at load 18); the
    # next test pins the mark between the app's own stamps around its send.
    assert apps.FIRST_TOKEN_DELAY_S * 1000 - 1 <= gap_ms
    iterate = next(s for s in record.stages if s.name == "stream.iterate")
    assert iterate.kind == "generator" and iterate.items == apps.STREAM_CHUNKS + 2
    # Own time excludes the 30 ms sleep inside the generator (timers may fire ~1 ms early).
    slept_ns = int(apps.FIRST_TOKEN_DELAY_S * 1e9) - 1_000_000
    assert iterate.duration_ns < slept_ns <= iterate.end_ns - iterate.start_ns
    # Server-Timing only has the stages finished before the headers.
    assert "stream.iterate" not in response.headers["server-timing"]


def test_ttft_mark_is_taken_when_the_token_chunk_is_sent(backend: Backend) -> None:
    """In-process: the mark lies between the app's own timestamps around send()."""
    sent_at: dict[str, int] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": apps.ROLE, "more_body": True})
        sent_at["before"] = time.perf_counter_ns()
        await send({"type": "http.response.body", "body": apps.TOKEN, "more_body": True})
        sent_at["after"] = time.perf_counter_ns()
        await send({"type": "http.response.body", "body": apps.DONE, "more_body": False})

    async def drive() -> None:
        await backend.middleware(app)(http_scope("POST", "/s"), no_body, discard)

    with capture_records() as records:
        asyncio.run(drive())
    [record] = records
    assert sent_at["before"] <= record.marks["first_token"] <= sent_at["after"]
    assert record.chunks == 2 and record.marks["last_byte"] >= sent_at["after"]


def serve_in_process(app: Any, backend: Backend) -> None:
    async def serve() -> None:
        with contextlib.suppress(RuntimeError):
            await backend.middleware(app)(http_scope("POST", "/s"), no_body, discard)

    asyncio.run(serve())


@pytest.mark.parametrize("size", [1, 7, 64, 1000, len(apps.TOKEN)])
def test_long_stream_counts_are_exact_however_the_body_is_split(size: int, backend: Backend) -> None:
    """After the first token, body messages are counted in batches: the counts
    stay exact across batch and message boundaries, also for a stream cut short."""
    tokens = 53  # more than three batches, not a multiple of one
    stream = apps.ROLE + apps.TOKEN * tokens + apps.DONE
    parts = [stream[i : i + size] for i in range(0, len(stream), size)]
    cut = len(parts) // 2
    sent_before_token: list[int] = []

    def stream_app(stop_after: int | None) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            for n, part in enumerate(parts):
                if stop_after is not None and n == stop_after:
                    raise RuntimeError("the upstream went away")
                if sum(map(len, parts[: n + 1])) >= len(apps.ROLE) + len(apps.TOKEN) and not sent_before_token:
                    sent_before_token.append(time.perf_counter_ns())
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        return app

    with capture_records() as records:
        serve_in_process(stream_app(None), backend)
        serve_in_process(stream_app(cut), backend)
    whole, cut_short = records
    assert (whole.chunks, whole.body_bytes, whole.error) == (tokens + 1, len(stream), None)
    assert whole.marks["first_token"] >= sent_before_token[0] and "last_byte" in whole.marks
    sent = b"".join(parts[:cut])
    assert cut_short.body_bytes == len(sent)
    assert cut_short.chunks == sent.count(b"\ndata:") + sent.startswith(b"data:") - sent.count(b"[DONE]")
    assert cut_short.error == "RuntimeError" and "last_byte" not in cut_short.marks


def test_traceparent_is_kept_and_headers_can_be_turned_off(backend: Backend) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    app = backend.middleware(apps.make_app(backend.stage), server_timing="off", overhead_header="off")
    with capture_records() as records, uvicorn_server(app) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json={}, headers={"traceparent": traceparent})
        wait_for(records, 1)
    assert "server-timing" not in response.headers and OVERHEAD_HEADER not in response.headers
    assert records[0].traceparent == traceparent


def test_app_exception_gives_an_error_record_and_the_same_response(backend: Backend) -> None:
    def get(app: Any) -> httpx.Response:
        with uvicorn_server(app) as url:
            return httpx.get(f"{url}/boom")

    bare = get(apps.make_app(backend.stage))
    with capture_records() as records:
        wrapped = get(backend.middleware(apps.make_app(backend.stage)))
    assert (wrapped.status_code, wrapped.text) == (bare.status_code, bare.text) == (500, "Internal Server Error")
    [record] = records
    assert record.error == "RuntimeError"
    assert [s.name for s in record.stages] == ["auth"] and record.stages[0].end_ns > 0


def disconnect_mid_stream(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    body = b'{"stream": true, "gap_s": 0.02}'
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        received = b""
        while b'"content"' not in received:
            received += sock.recv(65536)
    # Closed after the first content chunk; the app's generator is cancelled.


def test_client_disconnect_mid_stream_closes_the_record_with_an_error(backend: Backend) -> None:
    outcomes = {}
    for label, app in (
        ("bare", apps.make_app(backend.stage)),
        ("wrapped", backend.middleware(apps.make_app(backend.stage))),
    ):
        apps.events["stream_closed"].clear()
        with capture_records() as records, uvicorn_server(app) as url:
            disconnect_mid_stream(url)
            deadline = time.monotonic() + 5
            while not apps.events["stream_closed"] and time.monotonic() < deadline:
                time.sleep(0.01)
            if label == "wrapped":
                wait_for(records, 1)
        outcomes[label] = list(apps.events["stream_closed"])
    assert outcomes["bare"] == outcomes["wrapped"] == ["closed"]
    [record] = records
    assert record.error in ("client_disconnected", "incomplete_response", "CancelledError")
    assert "last_byte" not in record.marks
    assert 0 < record.chunks < apps.STREAM_CHUNKS


def test_websocket_passes_through_untouched_and_the_lifespan_shutdown_flushes(backend: Backend) -> None:
    from litellm_perfkit._core import _sink

    seen: list[Any] = []
    sent: list[Any] = []
    flushed: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope["type"], current_timeline(), receive, send))
        if scope["type"] == "lifespan":
            await send({"type": "lifespan.startup.complete"})
            flushed.append("after startup")
            await send({"type": "lifespan.shutdown.complete"})

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        sent.append((message["type"], list(flushed)))

    previous = (_sink.sink, _sink._on_shutdown)
    _sink.set_sink(lambda timeline: None, lambda: flushed.append("flushed"))
    try:
        middleware = backend.middleware(app)
        for kind in ("lifespan", "websocket"):
            asyncio.run(middleware({"type": kind}, receive, send))
    finally:
        _sink.sink, _sink._on_shutdown = previous
    assert seen[0][:3] == ("lifespan", None, receive) and seen[1] == ("websocket", None, receive, send)
    # The app's messages go out as it sent them; the flush runs before the server hears of the shutdown.
    assert sent == [
        ("lifespan.startup.complete", []),
        ("lifespan.shutdown.complete", ["after startup", "flushed"]),
    ]


def test_a_perfkit_bug_never_changes_the_response(backend: Backend) -> None:
    """perfkit's own state is broken (a finished stage whose start is not a
    number), so building Server-Timing fails: the error is counted and the
    app's response goes out as the app made it, in Python and in C alike."""
    from litellm_perfkit._core import _guard

    inner = apps.make_app(backend.stage)

    async def corrupting(scope: Any, receive: Any, send: Any) -> None:
        timeline = current_timeline()
        assert timeline is not None
        # A list in place of the C timeline's StageList, which refuses such a stage when appended.
        timeline.finished = [*timeline.finished, (99, "broken", "not a number", 0, -1)]  # type: ignore[list-item]
        await inner(scope, receive, send)

    before = _guard.internal_error_counts().get("middleware.send", 0)
    with capture_records(), uvicorn_server(backend.middleware(corrupting)) as url:
        responses = [httpx.post(f"{url}/v1/chat/completions", json={}) for _ in range(3)]
    assert all(r.status_code == 200 and b"RESPONSE_BODY_SECRET" in r.content for r in responses)
    assert not any("server-timing" in r.headers or OVERHEAD_HEADER in r.headers for r in responses)
    assert _guard.internal_error_counts()["middleware.send"] == before + 3


def test_a_collector_pause_inside_a_request_is_recorded_and_named_in_server_timing(backend: Backend) -> None:
    """The first request's handler sets off a full collection before its
    response starts; the second request has none (automatic collection is off)."""
    pauses: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/collect":
            garbage = [[] for _ in range(50_000)]
            for a, b in zip(garbage, garbage[1:]):
                a.append(b)
                b.append(a)
            del garbage
            started = time.perf_counter_ns()
            gc.collect()
            pauses.append(time.perf_counter_ns() - started)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}", "more_body": False})

    sent, keep = keeping()

    async def drive() -> None:
        middleware = backend.middleware(app)
        for path in ("/collect", "/quiet"):
            await middleware(http_scope("GET", path), no_body, keep)

    with no_collections(), capture_records() as records:
        asyncio.run(drive())
    collected, quiet = records
    assert 0.8 * pauses[0] <= collected.gc_pause_ns <= pauses[0]
    timing = parse_server_timing(dict(sent[0]["headers"])[b"server-timing"].decode())
    assert timing["gc"] == pytest.approx(collected.gc_pause_ns / 1e6, abs=0.001)
    assert quiet.gc_pause_ns == 0
    assert b"gc;" not in dict(sent[2]["headers"]).get(b"server-timing", b"")


def _serve_from(
    backend: Backend, client: str, headers: list[tuple[bytes, bytes]], **options: Any
) -> tuple[dict[bytes, bytes], list[Any]]:
    """One request from ``client`` through the middleware: the response's headers and the headers the app saw."""
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(list(scope["headers"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sent, send = keeping()
    asyncio.run(backend.middleware(app, **options)(http_scope("GET", "/", headers, (client, 5000)), no_body, send))
    return dict(sent[0]["headers"]), seen[0]


@pytest.mark.parametrize(
    ("client", "headers", "timings"),
    [
        ("127.0.0.1", [], True),
        ("::1", [], True),
        ("10.1.2.3", [], False),
        ("10.1.2.3", [(b"x-perfkit-secret", b"s3cret")], True),
        ("10.1.2.3", [(b"x-perfkit-secret", b"wrong")], False),
    ],
)
def test_timing_headers_go_to_trusted_clients_only_by_default(
    backend: Backend, client: str, headers: list[Any], timings: bool
) -> None:
    with capture_records() as records:
        got, seen = _serve_from(backend, client, [(b"host", b"x"), *headers], header_secret="s3cret")
    assert (OVERHEAD_HEADER.encode() in got) is timings
    assert timings or b"server-timing" not in got
    assert all(name != b"x-perfkit-secret" for name, _ in seen)  # the app never sees the secret
    assert len(records) == 1  # recorded and exported either way


def test_on_and_off_apply_to_everyone(backend: Backend) -> None:
    assert OVERHEAD_HEADER.encode() in _serve_from(backend, "10.1.2.3", [], overhead_header="on")[0]
    assert OVERHEAD_HEADER.encode() not in _serve_from(backend, "127.0.0.1", [], overhead_header="off")[0]


def test_summed_upstream_waits_before_the_headers_are_subtracted(backend: Backend) -> None:
    """A wait summed into an upstream stage (a stream's first chunk read before
    the proxy answers) counts as upstream in x-perfkit-overhead-ms, as block stages do."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        timeline = current_timeline()
        assert timeline is not None
        started = time.perf_counter_ns()
        await asyncio.sleep(0.02)  # waiting on the provider
        timeline.add_generator_time("stream.upstream_wait", started, time.perf_counter_ns() - started, 1, "sum")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = backend.middleware(app, upstream_stages=("upstream", "stream.upstream_wait"))
    with capture_records() as records, uvicorn_server(middleware) as url:
        response = httpx.get(f"{url}/")
        wait_for(records, 1)
    [record] = records
    overhead = float(response.headers[OVERHEAD_HEADER])
    assert record.upstream_ns >= 19_000_000
    assert overhead == pytest.approx(
        (record.marks["headers_sent"] - record.start_ns - record.upstream_ns) / 1e6, abs=0.002
    )
    assert overhead < 5


def test_record_ratio_records_that_share_and_leaves_the_rest_untouched(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from litellm_perfkit._core import _sampling

    draws = iter([0.05, 0.5, 0.9, 0.2, 0.99, 0.1] * 2)
    monkeypatch.setattr(_sampling, "draw", lambda: next(draws))
    app = backend.middleware(apps.make_app(backend.stage), record_ratio=0.25)
    with capture_records() as records, uvicorn_server(app) as url:
        responses = [httpx.post(f"{url}/v1/chat/completions", json={"messages": []}) for _ in range(6)]
        wait_for(records, 3)
        time.sleep(0.2)
    assert [r.status_code for r in responses] == [200] * 6
    # Drawn below 0.25: recorded, with their headers; the others answered without a trace of perfkit.
    assert len(records) == 3
    assert [OVERHEAD_HEADER in r.headers for r in responses] == [True, False, False, True, False, True]
    assert all("server-timing" not in r.headers for n, r in enumerate(responses) if n in (1, 2, 4))


def test_record_rate_records_two_seconds_worth_at_once_and_counts_the_rest(backend: Backend) -> None:
    from litellm_perfkit._core._sampling import UNRECORDED

    app = backend.middleware(apps.make_app(backend.stage), record_rate=1.0)
    app._record_choice._clock = lambda: 10**9  # type: ignore[attr-defined]  # five requests within the same second
    before = UNRECORDED.count
    with capture_records() as records, uvicorn_server(app) as url:
        responses = [httpx.post(f"{url}/v1/chat/completions", json={"messages": []}) for _ in range(5)]
        wait_for(records, 2)
        time.sleep(0.2)
    assert [OVERHEAD_HEADER in r.headers for r in responses] == [True, True, False, False, False]
    assert len(records) == 2 and UNRECORDED.count - before == 3


def test_record_ratio_from_the_environment(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from litellm_perfkit._core import _guard
    from litellm_perfkit._core._sampling import record_ratio_from_env

    monkeypatch.setenv("PERFKIT_RECORD_RATIO", "0.1")
    assert record_ratio_from_env() == 0.1
    monkeypatch.setattr(_guard, "_warned", set())
    for bad in ("2", "a tenth"):
        monkeypatch.setenv("PERFKIT_RECORD_RATIO", bad)
        assert record_ratio_from_env() == 1.0
    assert "PERFKIT_RECORD_RATIO='2' is not a number from 0 to 1" in caplog.text


def test_the_route_template_scheme_and_server_are_on_the_record(backend: Backend) -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def item(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = backend.middleware(
        Starlette(routes=[Route("/openai/deployments/{name}/chat/completions", item, methods=["POST"])])
    )
    with capture_records() as records, uvicorn_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        assert httpx.post(f"{url}/openai/deployments/gpt/chat/completions").status_code == 200
        assert httpx.get(f"{url}/nowhere").status_code == 404
        wait_for(records, 2)
    matched, unmatched = sorted(records, key=lambda r: r.status)
    assert matched.attributes["http.route"] == "/openai/deployments/{name}/chat/completions"
    assert {k: matched.attributes[k] for k in ("url.scheme", "server.address", "server.port")} == {
        "url.scheme": "http",
        "server.address": "127.0.0.1",
        "server.port": port,
    }
    assert "http.route" not in unmatched.attributes  # no route matched: the span is named by its path
