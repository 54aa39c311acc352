"""The standalone server and the ASGI app, driven by the official openai SDK."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
from typing import Any

import httpx
import openai
import orjson
import pytest

from litellm_perfkit._mock._engine import MockEngine
from litellm_perfkit._mock._server import MockProtocol
from litellm_perfkit.mock import Deployment, MockApp, MockConfig, ModelProfile
from tests.support.litellm_env import litellm_env, litellm_python
from tests.support.mock_server import mock_server
from tests.support.servers import uvicorn_server

FAST = MockConfig(default=ModelProfile(chunks=5), deployments=(Deployment("d", 0),))
MESSAGES = [{"role": "user", "content": "hello " * 50}]


def test_openai_sync_client_non_streaming_and_usage() -> None:
    with mock_server(FAST) as (url,):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test")
        response = client.chat.completions.create(model="gpt-x", messages=MESSAGES)  # type: ignore[arg-type]
    assert response.choices[0].message.content == "tok tok tok tok tok"
    assert response.choices[0].finish_reason == "stop"
    assert response.usage is not None and response.usage.completion_tokens == 5 and response.usage.prompt_tokens == 75
    assert response.model == "gpt-x"
    stamp = response.model_extra["perfkit"]  # type: ignore[index]
    assert stamp["seq"] == 0 and stamp["mono_ns"] > 0


def test_openai_async_streaming_with_usage_and_ground_truth() -> None:
    async def run(url: str) -> list[openai.types.chat.ChatCompletionChunk]:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test")
        stream = await client.chat.completions.create(
            model="gpt-x",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},  # type: ignore[arg-type]
        )
        return [chunk async for chunk in stream]

    with mock_server(FAST) as (url,):
        chunks = asyncio.run(run(url))
    roles = [c.choices[0].delta.role for c in chunks if c.choices]
    contents = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert roles[0] == "assistant" and contents == ["tok", " tok", " tok", " tok", " tok"]
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 80
    stamps = [c.model_extra["perfkit"] for c in chunks]  # type: ignore[index]
    assert [s["seq"] for s in stamps] == list(range(len(chunks)))
    assert all(a["mono_ns"] <= b["mono_ns"] for a, b in zip(stamps, stamps[1:]))


def test_completions_embeddings_models_and_health() -> None:
    with mock_server(FAST) as (url,):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test")
        completion = client.completions.create(model="m", prompt="hi", max_tokens=2)
        embeddings = client.embeddings.create(model="e", input=["a", "b"])
        models = client.models.list()
        health = httpx.get(f"{url}/health")
        streamed = list(client.completions.create(model="m", prompt="hi", stream=True))
    assert completion.choices[0].text == "tok tok" and completion.choices[0].finish_reason == "length"
    assert [e.index for e in embeddings.data] == [0, 1] and len(embeddings.data[0].embedding) == 8
    assert "mock-model" in [m.id for m in models.data]
    assert health.json() == {"status": "ok"}
    assert "".join(c.choices[0].text for c in streamed) == "tok tok tok tok tok"


TIMED = MockConfig(default=ModelProfile(ttft_ms=50, itl_ms=10, chunks=5), deployments=(Deployment("d", 0),))


def _timed_requests(url: str, requests: int) -> tuple[list[list[float]], list[float]]:
    """Per request, each content chunk's send stamp after the mock's receive stamp (ms),
    and the TTFT a light client saw (ms)."""
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    stamped, observed = [], []
    with httpx.Client() as client:
        for _ in range(requests):
            started = time.perf_counter()
            with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
                received_ns = int(response.headers["x-perfkit-mock-received-ns"])
                sent, first_seen = [], None
                for line in response.iter_lines():
                    if line.startswith("data: {") and '"content":"tok"' in line.replace(" ", ""):
                        first_seen = first_seen or time.perf_counter()
                        sent.append(orjson.loads(line[6:])["perfkit"]["mono_ns"])
            stamped.append([(at - received_ns) / 1e6 for at in sent])
            observed.append((first_seen - started) * 1000)  # type: ignore[operator]
    return stamped, observed


def test_no_chunk_is_sent_before_its_configured_time() -> None:
    """What holds on a loaded machine: every chunk, in order, no earlier than ttft + k * itl after the
    request arrived (less 1 ms: timers have millisecond resolution), and the client saw it no sooner."""
    with mock_server(TIMED) as (url,):
        stamped, observed = _timed_requests(url, 5)
    for offsets, seen in zip(stamped, observed):
        assert len(offsets) == 5 and offsets == sorted(offsets), offsets
        assert all(at >= 50 + 10 * k - 1 for k, at in enumerate(offsets)), offsets
        assert seen >= offsets[0] - 1, (seen, offsets)


@pytest.mark.quiet
@pytest.mark.integration
def test_configured_ttft_and_itl_are_reproduced_within_a_millisecond() -> None:
    """By the mock's own stamps (send time minus receive time), and as a light client sees it:
    medians of 5 repeats of 10 requests, each repeat's median first."""
    ttft, gaps, observed = [], [], []
    with mock_server(TIMED) as (url,):
        for _ in range(5):
            stamped, seen = _timed_requests(url, 10)
            ttft.append(statistics.median(offsets[0] for offsets in stamped))
            gaps.append(statistics.median(b - a for offsets in stamped for a, b in zip(offsets, offsets[1:])))
            observed.append(statistics.median(seen))
    assert abs(statistics.median(ttft) - 50) <= 1, ttft
    assert abs(statistics.median(gaps) - 10) <= 1, gaps
    assert 49 <= statistics.median(observed) < 53, observed  # timers (ms resolution) may fire slightly early


def test_two_deployments_with_quotas_in_one_process() -> None:
    config = MockConfig(deployments=(Deployment("a", 0, rpm=30), Deployment("b", 0, rpm=30)))
    with mock_server(config) as urls, httpx.Client() as client:
        assert len(set(urls)) == 2
        statuses = [
            client.post(f"{urls[i % 2]}/v1/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code
            for i in range(100)
        ]
        limited = client.post(f"{urls[0]}/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert statuses.count(200) == 60 and statuses.count(429) == 40
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


def test_timeouts_and_mid_stream_disconnects_reach_the_client() -> None:
    hang = MockConfig(default=ModelProfile(timeout_fraction=1.0), seed=1, deployments=(Deployment("d", 0),))
    cut = MockConfig(
        default=ModelProfile(disconnect_fraction=1.0, chunks=10), seed=1, deployments=(Deployment("d", 0),)
    )
    with mock_server(hang) as (url,):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", timeout=0.3, max_retries=0)
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    with mock_server(cut) as (url,):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        with pytest.raises((openai.APIError, httpx.HTTPError)):
            list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))  # type: ignore[arg-type]


def test_a_malformed_event_reaches_the_client_as_sent() -> None:
    config = MockConfig(
        default=ModelProfile(malformed_fraction=1.0, chunks=3), seed=1, deployments=(Deployment("d", 0),)
    )
    with mock_server(config) as (url,):
        stream = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True})
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        with pytest.raises(ValueError):  # the SDK's JSON decoder on the cut event
            list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))  # type: ignore[arg-type]
    events = stream.content.split(b"\n\n")
    assert stream.status_code == 200 and sum(b"malformed" in e for e in events) == 1
    assert events[-2] == b"data: [DONE]"


def test_the_asgi_app_serves_the_same_responses() -> None:
    with uvicorn_server(MockApp(FAST)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k")
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))  # type: ignore[arg-type]
        plain = client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        bad = httpx.post(f"{url}/v1/chat/completions", content=b"{oops")
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == plain.choices[0].message.content
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"


LITELLM_CLIENT = """
import asyncio, sys, litellm
url = sys.argv[1]
r = litellm.completion(model="openai/gpt-x", api_base=url + "/v1", api_key="sk-x", messages=[{"role": "user", "content": "hi"}])
print(r.choices[0].message.content, r.usage.completion_tokens)
async def stream():
    s = await litellm.acompletion(model="openai/gpt-x", api_base=url + "/v1", api_key="sk-x", stream=True,
                                  messages=[{"role": "user", "content": "hi"}])
    return "".join([c.choices[0].delta.content or "" async for c in s])
print(asyncio.run(stream()))
"""


@pytest.mark.integration
@pytest.mark.litellm
def test_litellm_sdk_as_a_client() -> None:
    python = litellm_python("1.83.14")
    with mock_server(FAST) as (url,):
        result = subprocess.run(
            [str(python), "-c", LITELLM_CLIENT, url], capture_output=True, text=True, env=litellm_env(), timeout=300
        )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines[-2] == "tok tok tok tok tok 5"
    assert lines[-1] == "tok tok tok tok tok"


class _LateTimers:
    """A loop whose pending timers fire latest deadline first: the worst order
    a loop whose timers slip (uvloop's, under preemption) can produce."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, int, Any, tuple[Any, ...]]] = []

    def time(self) -> float:
        return 100.0

    def call_at(self, when: float, callback: Any, *args: Any) -> Any:
        entry = (when, len(self.pending), callback, args)
        self.pending.append(entry)
        return _Cancel(self.pending, entry)

    def call_later(self, delay: float, callback: Any, *args: Any) -> Any:
        return self.call_at(self.time() + delay, callback, *args)

    def run(self) -> None:
        while self.pending:
            entry = max(self.pending)
            self.pending.remove(entry)
            entry[2](*entry[3])


class _Cancel:
    def __init__(self, pending: list[Any], entry: Any) -> None:
        self.pending, self.entry = pending, entry

    def cancel(self) -> None:
        if self.entry in self.pending:
            self.pending.remove(self.entry)


class _Transport:
    def __init__(self) -> None:
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        pass


def test_stream_events_go_out_in_order_when_timers_fire_out_of_order() -> None:
    config = MockConfig(default=ModelProfile(ttft_ms=5, itl_ms=1, chunks=5), deployments=(Deployment("d", 0),))

    async def make() -> MockProtocol:
        return MockProtocol(MockEngine(config, config.deployments[0]))

    protocol = asyncio.run(make())
    loop, transport = _LateTimers(), _Transport()
    protocol.loop = loop  # type: ignore[assignment]
    protocol.connection_made(transport)  # type: ignore[arg-type]
    body = orjson.dumps({"model": "m", "messages": MESSAGES, "stream": True})
    protocol.data_received(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
    loop.run()
    events = [orjson.loads(line[6:]) for line in transport.written.split(b"\r\n") if line.startswith(b"data: {")]
    assert [e["perfkit"]["seq"] for e in events] == list(range(7))
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events) == "tok tok tok tok tok"
    assert transport.written.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n") and not protocol.busy
