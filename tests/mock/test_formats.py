"""The mock's other APIs, through the clients that speak them: Azure deployment
paths (openai's AzureOpenAI), Anthropic Messages (the anthropic SDK) and the
Responses API (openai's Responses client), with exact timing and stamps."""

from __future__ import annotations

import asyncio
import statistics
import time

import anthropic
import httpx
import openai
import orjson
import pytest

from litellm_perfkit._mock._engine import MockEngine, route
from litellm_perfkit._wire._names import MOCK_RECEIVED_HEADER
from litellm_perfkit.mock import Deployment, MockConfig, ModelProfile
from tests.support.mock_server import mock_server

FAST = MockConfig(default=ModelProfile(chunks=5), deployments=(Deployment("d", 0),))
TIMED = MockConfig(default=ModelProfile(ttft_ms=60, itl_ms=10, chunks=5), deployments=(Deployment("d", 0),))
USER = [{"role": "user", "content": "hello " * 50}]


def test_routes() -> None:
    assert route("/v1/messages", "") == ("messages", None)
    assert route("/responses", "") == ("responses", None)
    assert route("/openai/v1/chat/completions", "") == ("chat", None)
    assert route("/openai/deployments/gpt-d/chat/completions", "api-version=2024-10-21") == ("chat", "gpt-d")
    assert route("/openai/deployments/gpt-d/embeddings", "api-version=x") == ("embeddings", "gpt-d")
    assert "api-version" in str(route("/openai/deployments/gpt-d/chat/completions", ""))
    assert str(route("/v2/chat/completions", "")).startswith("Unknown path")


def test_azure_openai_client_non_streaming_and_streaming() -> None:
    with mock_server(FAST) as (url,):
        client = openai.AzureOpenAI(azure_endpoint=url, api_key="k", api_version="2024-10-21")
        response = client.chat.completions.create(model="gpt-d", messages=USER)  # type: ignore[arg-type]
        chunks = list(client.chat.completions.create(model="gpt-d", messages=USER, stream=True))  # type: ignore[arg-type]
        embeddings = client.embeddings.create(model="emb-d", input="x")
        missing = httpx.post(f"{url}/openai/deployments/gpt-d/chat/completions", json={"messages": USER})
    assert response.choices[0].message.content == "tok tok tok tok tok" and response.model == "gpt-d"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "tok tok tok tok tok"
    assert len(embeddings.data[0].embedding) == 8
    assert missing.status_code == 404 and "api-version" in missing.json()["error"]["message"]


def test_anthropic_sdk_messages_json_and_stream() -> None:
    with mock_server(FAST) as (url,):
        client = anthropic.Anthropic(base_url=url, api_key="k")
        message = client.messages.create(model="claude-x", max_tokens=100, messages=USER)  # type: ignore[arg-type]
        with client.messages.stream(model="claude-x", max_tokens=3, messages=USER) as stream:  # type: ignore[arg-type]
            texts = list(stream.text_stream)
            final = stream.get_final_message()
        error = httpx.post(f"{url}/v1/messages", json={"model": "m"})
    assert message.content[0].type == "text" and message.content[0].text == "tok tok tok tok tok"
    assert message.stop_reason == "end_turn" and message.usage.input_tokens == 75 and message.usage.output_tokens == 5
    assert message.model_extra is not None and message.model_extra["perfkit"]["seq"] == 0
    assert texts == ["tok", " tok", " tok"] and final.stop_reason == "max_tokens" and final.usage.output_tokens == 3
    assert (
        error.status_code == 400 and error.json()["type"] == "error" and "messages" in error.json()["error"]["message"]
    )


def test_openai_responses_client_json_and_stream() -> None:
    with mock_server(FAST) as (url,):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k")
        response = client.responses.create(model="gpt-x", input="hello " * 50)
        events = list(client.responses.create(model="gpt-x", input=[{"role": "user", "content": "hi"}], stream=True))
    assert response.output_text == "tok tok tok tok tok" and response.status == "completed"
    assert response.usage is not None and response.usage.input_tokens == 75 and response.usage.output_tokens == 5
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "tok tok tok tok tok"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == "tok tok tok tok tok"  # type: ignore[union-attr]


async def _deltas(url: str, path: str, body: dict[str, object], kind: bytes) -> list[float]:
    """Each ``kind`` event's send stamp after the mock's own receive stamp (ms): the origin is the mock's
    receive stamp, because a loaded machine can delay a first connection by hundreds of milliseconds."""
    seen = []
    async with httpx.AsyncClient() as client:
        sent = time.perf_counter_ns()
        async with client.stream("POST", f"{url}{path}", json=body) as response:
            received = int(response.headers[MOCK_RECEIVED_HEADER])
            assert received >= sent
            async for line in response.aiter_lines():
                if line.startswith("data: ") and kind in line.encode():
                    seen.append((orjson.loads(line[6:])["perfkit"]["mono_ns"] - received) / 1e6)
    return seen


def _timed_streams(url: str) -> dict[str, list[float]]:
    return {
        "anthropic": asyncio.run(
            _deltas(
                url,
                "/v1/messages",
                {"model": "m", "max_tokens": 9, "messages": USER, "stream": True},
                b"content_block_delta",
            )
        ),
        "responses": asyncio.run(
            _deltas(url, "/v1/responses", {"model": "m", "input": "x", "stream": True}, b"output_text.delta")
        ),
    }


def test_anthropic_and_responses_streams_send_no_event_before_its_time() -> None:
    """What holds on a loaded machine: five content events, in order, each no earlier than
    ttft + k * itl after the mock received the request (less 1 ms: millisecond timers)."""
    with mock_server(TIMED) as (url,):
        streams = _timed_streams(url)
    for times in streams.values():
        assert len(times) == 5 and times == sorted(times), times
        assert all(at >= 60 + 10 * k - 1 for k, at in enumerate(times)), times


@pytest.mark.quiet
@pytest.mark.integration
def test_anthropic_and_responses_streams_keep_the_configured_timing() -> None:
    """The first content event comes ttft after the mock received the request, the next ones itl
    apart, by the mock's stamps: medians of 7 repeats, within two milliseconds."""
    firsts: dict[str, list[float]] = {"anthropic": [], "responses": []}
    gaps: dict[str, list[float]] = {"anthropic": [], "responses": []}
    with mock_server(TIMED) as (url,):
        for _ in range(7):
            for api, times in _timed_streams(url).items():
                firsts[api].append(times[0])
                gaps[api].append(statistics.median(b - a for a, b in zip(times, times[1:])))
    # The client reads each event a little after the mock sends it, and uvloop's
    # timers round to whole milliseconds: medians of 60.4-61.3 ms on a quiet machine.
    for api in firsts:
        assert abs(statistics.median(firsts[api]) - 60) <= 2, (api, firsts[api])
        assert abs(statistics.median(gaps[api]) - 10) <= 2, (api, gaps[api])


def test_engine_plans_the_same_stamps_for_every_format() -> None:
    engine = MockEngine(FAST, FAST.deployments[0])
    for target, body in (
        ("/v1/messages", {"model": "m", "messages": USER, "stream": True}),
        ("/v1/responses", {"model": "m", "input": "x", "stream": True}),
        ("/openai/deployments/d/chat/completions?api-version=1", {"messages": USER, "stream": True}),
    ):
        plan = engine.plan("POST", target, orjson.dumps(body))
        assert plan.status == 200 and plan.offsets_s is not None and plan.render is not None
        rendered = [plan.render(seq) for seq in range(len(plan.offsets_s))]
        stamped = [
            orjson.loads(event.split(b"data: ", 1)[1])["perfkit"]["seq"] for event in rendered if b'"perfkit"' in event
        ]
        assert stamped == list(range(len(stamped))) and len(stamped) >= 5
