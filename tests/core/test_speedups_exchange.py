"""The C exchange (send, SSE counting, the response start, finish) and the
C token reader against their Python references."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from litellm_perfkit._core import _sink
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._timeline import Timeline
from litellm_perfkit._wire._events import data_has_token
from tests.support import backends
from tests.support.clock import installed
from tests.support.no_collections import no_collections
from tests.support.speedups import STAGE_NAMES, TickClock, speedups
from tests.support.timelines import observable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def collected() -> Iterator[list[Timeline]]:
    timelines: list[Timeline] = []
    _sink.set_sink(timelines.append)
    try:
        with no_collections():  # the collector watch's total must not move between the two runs
            yield timelines
    finally:
        _sink.set_sink(None)


# -- the token reader ---------------------------------------------------------

KEYS = [
    "choices",
    "delta",
    "content",
    "tool_calls",
    "function_call",
    "reasoning_content",
    "reasoning",
    "text",
    "role",
    "index",
]


def _scalar(rng: random.Random) -> Any:
    return rng.choice([None, True, False, 0, 1, -0.0, 0.0, 0.5, 12, "", "a", "é", "\u0000", 10**17, 10**19])


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.4:
        return _scalar(rng)
    if roll < 0.7:
        return {rng.choice(KEYS): _value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def _event_json(rng: random.Random) -> bytes:
    choices = [
        {
            key: ({k: _value(rng, 3) for k in rng.sample(KEYS, rng.randrange(4))} if key == "delta" else _value(rng, 2))
            for key in rng.sample(KEYS, rng.randrange(4))
        }
        for _ in range(rng.randrange(3))
    ]
    event = (
        _value(rng, 0)
        if rng.random() < 0.1
        else {"id": "x", "choices": choices if rng.random() < 0.9 else _value(rng, 1)}
    )
    text = json.dumps(event, ensure_ascii=rng.random() < 0.5, separators=rng.choice([(",", ":"), (", ", ": ")]))
    if rng.random() < 0.2:  # a repeated key: the last one counts, as in a dict
        text = text.replace('"content": ', '"content": "", "content": ', 1).replace(
            '"content":', '"content":"x","content":', 1
        )
    data = bytearray(text.encode())
    if rng.random() < 0.4:  # broken: a byte in, a byte out, or cut short
        at = rng.randrange(len(data) + 1)
        roll = rng.random()
        if roll < 0.3 and data:
            del data[min(at, len(data) - 1)]
        elif roll < 0.6:
            data[at:at] = bytes([rng.choice(b' {}[],:"0123456789.-eE\\tnufal\n\x00\xc3')])
        else:
            del data[at:]
    return bytes(data)


def test_the_c_token_reader_agrees_with_python_wherever_it_decides() -> None:
    native = speedups()
    rng = random.Random(7)
    decided = 0
    for _ in range(20_000):
        data = _event_json(rng)
        answer = native.json_has_token(data)
        if answer is not None:
            decided += 1
            assert answer == data_has_token(data), data
    assert decided > 5_000  # the usual events are decided in C
    assert native.json_has_token(b' {"choices":[{"index":0,"delta":{"content":"tok"}}]}') is True
    assert native.json_has_token(b'{"choices":[{"delta":{"role":"assistant","content":""}}]}') is False


# -- the exchange ---------------------------------------------------------------


def _stream_bytes(rng: random.Random) -> bytes:
    newline = b"\r\n" if rng.random() < 0.2 else b"\n"
    events = []
    if rng.random() < 0.7:
        events.append(b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}')
    for n in range(rng.randrange(0, 25)):
        roll = rng.random()
        if roll < 0.1:
            events.append(b": keep-alive")
        elif roll < 0.2:
            events.append(
                b"event: message" + newline + b'data: {"choices":' + newline + b'data: [{"delta":{"content":"x"}}]}'
            )
        elif roll < 0.25:
            events.append(b'data:{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}')
        else:
            events.append(b'data: {"choices":[{"delta":{"content":"tok%d"}}]}' % n)
    if rng.random() < 0.8:
        events.append(rng.choice([b"data: [DONE]", b"data:[DONE]"]))
    return b"".join(event + newline + newline for event in events)


def _messages(rng: random.Random) -> list[dict[str, Any]]:
    streaming = rng.random() < 0.8
    content_type = b"text/event-stream; charset=utf-8" if streaming else b"application/json"
    headers: list[Any] = [(b"x-app", b"1")]
    if rng.random() < 0.95:
        headers.insert(rng.randrange(2), (rng.choice([b"content-type", b"Content-Type"]), content_type))
    if rng.random() < 0.2:
        headers = [list(pair) for pair in headers]
    messages: list[dict[str, Any]] = [
        {"type": "http.response.start", "status": rng.choice([200, 429, 500]), "headers": headers}
    ]
    body = _stream_bytes(rng) if streaming else b'{"ok": true}' * rng.randrange(3)
    at = 0
    while at < len(body):
        size = rng.choice([1, 3, 7, 13, 64, 1000]) if rng.random() < 0.7 else rng.randrange(1, 80)
        part: Any = body[at : at + size]
        if rng.random() < 0.1:
            part = rng.choice([memoryview, bytearray])(part)
        messages.append({"type": "http.response.body", "body": part, "more_body": True})
        if rng.random() < 0.05:
            messages.append({"type": "http.response.body", "body": b"", "more_body": True})
        at += size
    roll = rng.random()
    if roll < 0.8:
        messages.append({"type": "http.response.body", "body": b"", "more_body": False})
    elif roll < 0.9 and len(messages) > 1:
        messages[-1]["more_body"] = False
    return messages  # otherwise cut short: no final message


def _timeline(backend: Backend, rng: random.Random, seed_clock: int) -> Timeline:
    timeline = backend.timeline(seed_clock, "POST", "/v1/chat/completions")
    clock = seed_clock
    for index in range(rng.randrange(0, 6)):
        start = clock + rng.randrange(1, 5_000_000)
        clock = start + rng.randrange(0, 5_000_000)
        timeline.finished.append((index, rng.choice(STAGE_NAMES), start, clock, -1))
    if rng.random() < 0.2:
        timeline.generators["stream.iterate"] = [9, clock, clock, -1, rng.randrange(10**7), 3, "generator"]
    return timeline


def _exchange_run(
    backend: Backend, rng_seed: int, options: dict[str, Any], disconnected: bool
) -> tuple[Timeline, list[Any]]:
    rng = random.Random(rng_seed)
    messages = _messages(rng)
    timeline = _timeline(backend, rng, 1_000_000_000)
    headers: list[Any] = [(b"host", b"x"), (b"user-agent", b"y")]
    roll = rng.random()
    if roll < 0.3:
        headers.insert(rng.randrange(3), (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
    elif roll < 0.4:
        headers.append([b"traceparent", b"00-\xe9"])  # a list pair, latin-1
    elif roll < 0.45:
        headers.append((b"broken",))  # not a pair: counted, the request goes on
    scope = {"headers": headers}
    forwarded: list[Any] = []

    def server_send(message: Any) -> None:
        forwarded.append(message)

    middleware = backend.middleware(lambda *a: None, **options)  # type: ignore[arg-type]
    with installed(TickClock()):  # type: ignore[arg-type]
        exchange = middleware._exchange_class(middleware._loud, scope, timeline, None, server_send)
        if rng.random() < 0.3:
            timeline.gc_pause_ns -= 5  # as if the collector paused 5 ns since the request began
        for message in messages:
            exchange.send(message)
        exchange._disconnected = disconnected
        exchange.finish()
    return timeline, forwarded


def _observable(timeline: Timeline, forwarded: list[Any]) -> dict[str, Any]:
    return {
        **observable(timeline),
        "forwarded": [(m["type"], m.get("headers"), bytes(m.get("body", b""))) for m in forwarded],
    }


@pytest.mark.parametrize("seed", range(300))
def test_the_c_exchange_records_what_the_python_one_records(seed: int, collected: list[Timeline]) -> None:
    rng = random.Random(seed)
    options = {
        "server_timing": rng.choice(["on", "on", "off"]),
        "overhead_header": rng.choice(["on", "on", "off"]),
        "upstream_stages": rng.choice([("upstream",), ("upstream", "auth"), ()]),
    }
    disconnected = rng.random() < 0.3
    python = _observable(*_exchange_run(backends.load("python"), seed, options, disconnected))
    c = _observable(*_exchange_run(backends.load("c"), seed, options, disconnected))
    assert c == python
    assert len(collected) == 2


def test_the_c_exchange_counts_every_split_of_a_stream_exactly(collected: list[Timeline]) -> None:
    """Each byte boundary of a stream with CRLF events, a comment, a
    multi-line event and both [DONE] spellings, as two messages."""
    body = (
        b'data: {"choices":[{"delta":{"role":"assistant"}}]}\r\n\r\n: ping\n\n'
        b'data: {"choices":\ndata: [{"delta":{"content":"a"}}]}\n\n'
        b'data:{"choices":[{"delta":{"content":"b"}}]}\n\ndata:[DONE]\n\ndata: [DONE]\n\n'
    )
    for cut in range(len(body) + 1):
        parts = [body[:cut], body[cut:]]
        results = []
        for backend in (backends.load("python"), backends.load("c")):
            timeline = backend.timeline(0)
            middleware = backend.middleware(lambda *a: None)  # type: ignore[arg-type]
            exchange = middleware._exchange_class(middleware._loud, {"headers": []}, timeline, None, lambda m: None)
            exchange.send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            for part in parts:
                exchange.send({"type": "http.response.body", "body": part, "more_body": True})
            exchange.send({"type": "http.response.body", "body": b"", "more_body": False})
            exchange.finish()
            results.append((timeline.chunks, timeline.body_bytes, "first_token" in timeline.marks))
        # 4: data lines other than [DONE] (the two-line event counts twice; docs/telemetry.md)
        assert results[0] == results[1] == (4, len(body), True), cut


# -- a timeline field deleted ------------------------------------------------

# A Timeline's fields can be deleted (``del timeline.marks``), as the Python
# one's slots can: the request path then reports the AttributeError and goes
# on. The C path read the field's NULL and died (SIGSEGV), so each case runs in
# its own process.
DELETED_FIELD = """
import asyncio, sys
from litellm_perfkit import PerfkitMiddleware
from litellm_perfkit._core import _sink, current_timeline
from litellm_perfkit._core._guard import internal_error_counts
from tests.support.asgi import http_scope, keeping, no_body

field, steps = sys.argv[1], sys.argv[2]
_sink.set_sink(lambda timeline: None)

async def app(scope, receive, send):
    delattr(current_timeline(), field)
    for _ in range(3):  # steps apart, with CPU between them (PERFKIT_STEPS=cpu charges it to event_loop)
        sum(range(20000))
        await asyncio.sleep(0)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b'data: {"choices":[{"delta":{"content":"x"}}]}\\n\\n'})

sent, send = keeping()
middleware = PerfkitMiddleware(app, server_timing="on", overhead_header="on", steps=steps, record_ratio=1.0)
asyncio.run(middleware(http_scope("GET", "/", query_string=b""), no_body, send))
print(len(sent), sum(internal_error_counts().values()) > 0)
"""


@pytest.mark.parametrize(
    ("field", "steps"), [("marks", "off"), ("finished", "off"), ("generators", "off"), ("generators", "cpu")]
)
@pytest.mark.parametrize("name", backends.NAMES)
def test_a_deleted_timeline_field_is_reported_not_a_crash(field: str, steps: str, name: str) -> None:
    env = {**os.environ, "PERFKIT_SPEEDUPS": "on" if name == "c" else "off"}
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", DELETED_FIELD, field, steps],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stdout.split()) == (0, ["2", "True"]), result.stderr[-2000:]
