"""CPU versus waiting on the real LiteLLM proxy: at 1 user and at 32, auth's
own CPU per request, and its share of the request's, stay about the same
while its wall time does not; the CPU of the server's parsing, of its thread
calls and of its work after the response is named."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import defaultdict
from pathlib import Path

import httpx
import pytest

from litellm_perfkit._litellm._points import MIDDLEWARES
from litellm_perfkit._wire._names import AFTER_RESPONSE_STAGE, PROTOCOL_STAGE, THREAD_STAGE, Attr
from tests.support.litellm_env import VERSIONS
from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy
from tests.support.receiver import otlp_receiver, spans_of

pytestmark = [pytest.mark.integration, pytest.mark.litellm, pytest.mark.quiet]

RUN = time.time_ns() & 0xFFFFFFFF
LOADS = {1: 60, 32: 600}  # users: requests measured (after as many warming up)
BODY = {"model": "fake-openai-endpoint", "messages": [{"role": "user", "content": "hi"}]}


def _trace_id(users: int, n: int) -> str:
    return f"{RUN:08x}{users:08x}{n:016x}"


async def _drive(url: str, users: int, requests: int, first: int) -> None:
    numbers = iter(range(first, first + requests))
    async with httpx.AsyncClient(
        base_url=url,
        timeout=120,
        limits=httpx.Limits(max_connections=users),
        headers={"authorization": "Bearer sk-1234"},
    ) as client:

        async def user() -> None:
            for n in numbers:
                response = await client.post(
                    "/chat/completions", json=BODY, headers={"traceparent": f"00-{_trace_id(users, n)}-{n + 1:016x}-01"}
                )
                assert response.status_code == 200, response.text

        await asyncio.gather(*(user() for _ in range(users)))


@pytest.mark.parametrize("version", VERSIONS)
def test_auth_cpu_per_request_is_the_same_at_1_and_32_users(version: str, tmp_path: Path) -> None:
    with mock_process("--chunks", "3") as upstream, otlp_receiver() as (endpoint, received):
        with litellm_proxy(
            version, upstream, tmp_path, perfkit_args=("--endpoint", endpoint, "--protocol", "http/json")
        ) as url:
            for users, requests in LOADS.items():
                asyncio.run(_drive(url, users, requests, 0))  # warm-up
                asyncio.run(_drive(url, users, requests, 1 << 40))
            wanted = {_trace_id(users, (1 << 40) + n) for users, requests in LOADS.items() for n in range(requests)}
            deadline = time.monotonic() + 30
            while True:
                spans = [s for s in spans_of(received) if s["traceId"] in wanted]
                servers = {s["traceId"] for s in spans if s["kind"] == 2}
                if servers == wanted or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
    assert servers == wanted, f"{len(wanted - servers)} requests have no server span"
    # Per load: auth's CPU and wall time, and the request's own CPU, per request.
    measured: dict[int, dict[str, list[float]]] = {users: defaultdict(list) for users in LOADS}
    for span in spans:
        users = int(span["traceId"][8:16], 16)
        attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
        if span["name"] == "auth":
            measured[users]["cpu"].append(float(attrs.get(Attr.STAGE_CPU_MS, 0.0)))
            measured[users]["wall"].append(float(attrs[Attr.STAGE_DURATION_MS]))
        elif span["kind"] == 2:
            measured[users]["request_cpu"].append(float(attrs[Attr.CPU_MS]))
    cpu = {users: statistics.median(values["cpu"]) for users, values in measured.items()}
    wall = {users: statistics.median(values["wall"]) for users, values in measured.items()}
    request_cpu = {users: statistics.median(values["request_cpu"]) for users, values in measured.items()}
    summary = f"LiteLLM {version}: auth cpu {cpu} ms, wall {wall} ms, the request's own cpu {request_cpu} ms (medians per request)"
    print(summary)
    # About the same, not equal: at 1 user the core idles between requests and the same code runs slower after
    # it, by how much depends on the machine (a small loop 7-11% slower after 5-100 ms idle; auth 1.2-1.3x at 1 user
    # on the development machine, 1.56x and 2.2x on CI machines, with the whole request's CPU 2.0x). Had queueing
    # leaked into CPU, CPU would grow as the wall time does, 30x here; the bound is set to tell those apart, not to
    # measure the idle penalty, which the share below checks against the request's own.
    assert 0.5 < cpu[1] / cpu[32] < 3, summary
    # The idle penalty is the whole request's, not auth's: the request's own CPU was 1.2-1.5x higher at 1 user
    # too, and auth's share of it moved by 4-11% between the loads (both versions, two runs). A leak of auth's
    # queueing into its CPU would raise its share under load, and idle time counted as auth's CPU at 1 user would
    # raise it there; auth runs early in a request, so it may pay a little more of the idle penalty than the rest.
    share = {users: cpu[users] / request_cpu[users] for users in LOADS}
    assert 0.75 < share[1] / share[32] < 1.5, f"{summary}; auth's share of the request's CPU {share}"
    assert wall[32] > 10 * wall[1] and wall[32] > 3 * cpu[32], summary
    # The CPU outside the event loop's steps is named too: uvicorn's parsing
    # of each request, its completion() in the executor (threads), its
    # logging after the response; and LiteLLM's middlewares' own time.
    least_ms = {PROTOCOL_STAGE: 0.005, MIDDLEWARES: 0.005, THREAD_STAGE: 0.05, AFTER_RESPONSE_STAGE: 0.05}
    named: dict[str, dict[str, float]] = defaultdict(dict)
    for span in spans:
        if span["name"] in least_ms:
            attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
            named[span["name"]][span["traceId"]] = float(attrs.get(Attr.STAGE_CPU_MS, 0.0))
    for name, least in least_ms.items():
        assert set(named[name]) == wanted, f"{name}: {len(wanted - set(named[name]))} requests without it"
        assert statistics.median(named[name].values()) > least, (name, statistics.median(named[name].values()))
    # They are all inside the overhead's reconciliation: nothing counted twice.
    for span in spans:
        if span["kind"] == 2:
            attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
            assert float(attrs[Attr.UNATTRIBUTED_MS]) >= 0, attrs
