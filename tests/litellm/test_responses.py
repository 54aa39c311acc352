"""What clients receive from the real LiteLLM proxy under ``perfkit run``:
the plain proxy's responses, and streams whole and in order.

Both tests only send requests and read the answers, so they share one
instrumented proxy per version (``--exporter none``) on one mock.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.support.litellm_env import VERSIONS
from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

MESSAGES = [{"role": "user", "content": "hello there"}]
CHUNKS = 8


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with mock_process("--ttft-ms", "1", "--chunks", str(CHUNKS)) as url:
        yield url


@pytest.fixture(scope="module", params=VERSIONS)
def instrumented(
    request: pytest.FixtureRequest, upstream: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(version, url) of the version's proxy under perfkit run."""
    version = request.param
    workdir = tmp_path_factory.mktemp(f"perfkit-{version}")
    with litellm_proxy(version, upstream, workdir, perfkit_args=("--exporter", "none")) as url:
        yield version, url


def comparable(response: httpx.Response) -> tuple[int, Any, set[str]]:
    """Status, body and header names without per-request ids, timestamps and perfkit's own headers."""
    volatile = {
        "date",
        "content-length",
        "x-litellm-call-id",
        "x-litellm-response-duration-ms",
        "x-litellm-overhead-duration-ms",
        "server-timing",
        "x-perfkit-overhead-ms",
        "llm_provider-x-perfkit-mock-processing-ms",
        "llm_provider-x-perfkit-mock-received-ns",
        "x-litellm-callback-duration-ms",
        "llm_provider-content-length",
    }
    headers = {k for k in response.headers if k not in volatile}
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        body: Any = [
            {k: v for k, v in orjson.loads(line[6:]).items() if k not in ("id", "created", "perfkit")}
            for line in response.text.splitlines()
            if line.startswith("data: {")
        ]
    else:
        body = response.json()
        if isinstance(body, dict):
            for key in ("id", "created", "perfkit"):
                body.pop(key, None)
    return response.status_code, body, headers


CASES: list[tuple[str, dict[str, Any], str]] = [
    ("/v1/chat/completions", {"model": "fake-openai-endpoint", "messages": MESSAGES}, "sk-1234"),
    ("/v1/chat/completions", {"model": "fake-openai-endpoint", "messages": MESSAGES, "stream": True}, "sk-1234"),
    ("/chat/completions", {"model": "fake-openai-endpoint", "messages": MESSAGES, "max_tokens": 2}, "sk-1234"),
    ("/v1/embeddings", {"model": "fake-embedding", "input": ["a", "b"]}, "sk-1234"),
    ("/v1/chat/completions", {"model": "fake-openai-endpoint", "messages": MESSAGES}, "sk-wrong"),
    ("/v1/chat/completions", {"model": "no-such-model", "messages": MESSAGES}, "sk-1234"),
]


def test_responses_match_the_uninstrumented_proxy(upstream: str, instrumented: tuple[str, str], tmp_path: Path) -> None:
    version, url = instrumented

    def answers(url: str) -> list[tuple[int, Any, set[str]]]:
        return [
            comparable(httpx.post(f"{url}{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30))
            for path, body, key in CASES
        ]

    results = {"perfkit": answers(url)}
    with litellm_proxy(version, upstream, tmp_path, mode="plain") as plain:
        results["plain"] = answers(plain)
    for case, plain_answer, instrumented_answer in zip(CASES, results["plain"], results["perfkit"]):
        assert plain_answer == instrumented_answer, case
    assert [r[0] for r in results["perfkit"]][:4] == [200, 200, 200, 200]


@pytest.mark.parametrize("instrumented", ["1.103.0"], indirect=True)
def test_stream_chunks_arrive_in_order_under_concurrency(instrumented: tuple[str, str]) -> None:
    """perfkit re-drives LiteLLM's stream generator step by step: 400 streams
    from 16 concurrent clients must each arrive whole and in order (the first
    token has no leading space, the others do). Measured once at 2,000 streams: 0 bad."""
    expected = "tok" + " tok" * (CHUNKS - 1)
    _, url = instrumented
    clients = [openai.OpenAI(base_url=f"{url}/v1", api_key="sk-1234", max_retries=0) for _ in range(16)]

    def one(i: int) -> str:
        chunks = clients[i % 16].chat.completions.create(model="fake-openai-endpoint", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    with ThreadPoolExecutor(16) as pool:
        texts = list(pool.map(one, range(400)))
    bad = [text for text in texts if text != expected]
    assert not bad, f"{len(bad)} of 400 streams out of order or incomplete, e.g. {bad[:3]}"
