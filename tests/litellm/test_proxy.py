"""The real LiteLLM proxy (pinned versions from PyPI) under ``perfkit run``."""

from __future__ import annotations

import secrets
import socket
import subprocess
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.support.litellm_env import VERSIONS, litellm_env, litellm_python
from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy, proxy_log
from tests.support.receiver import Received, otlp_receiver, spans_of
from tests.support.servers import Jaeger

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

MESSAGES = [{"role": "user", "content": "hello there"}]
CALM_REQUESTS = 8
CALM_SLACK_MS = 5.0
"""The least a calm request's upstream stage exceeds the mock's hold by:
reaching the mock on loopback and reading its answer."""
COMMON = {
    "auth",
    "request.parse",
    "pre_call",
    "hooks.pre_call",
    "route",
    "hooks.during_call",
    "llm_call",
    "upstream",
    "headers",
    "callbacks.check",
}
NON_STREAM = COMMON | {"hooks.post_call", "serialize"}
STREAM = COMMON | {"stream.iterate", "stream.upstream_wait"}
FAST_PATH_KEYS = {
    "perfkit.litellm.version",
    "perfkit.litellm.stream_iterator",
    "perfkit.litellm.stream_iterator_layers",
    "perfkit.litellm.per_chunk_hook",
    "perfkit.litellm.pre_call_hooks",
    "perfkit.litellm.during_call_hooks",
    "perfkit.litellm.slow_path_callbacks",
}


def requests_of(received: Received, count: int, timeout_s: float = 20) -> dict[str, list[dict[str, Any]]]:
    """trace id -> spans, once ``count`` chat-completion server spans arrived."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans = spans_of(received)
        servers = [s for s in spans if s["kind"] == 2 and s["name"].endswith("/chat/completions")]
        if len(servers) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert len(servers) >= count, f"{len(servers)} server spans, wanted {count}"
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        by_trace[span["traceId"]].append(span)
    return {s["traceId"]: by_trace[s["traceId"]] for s in servers}


@dataclass(frozen=True)
class Sent:
    """One request as the client and the mock saw it."""

    stream: bool
    client_ms: float
    """From before the SDK call to the response read (for a stream, to its [DONE])."""
    mock_hold_ms: float | None
    """Non-streaming: the mock's send stamp on the body less its receipt of the
    request (docs/mock.md), which the proxy's upstream stage holds. None for a
    stream: LiteLLM re-serializes its chunks without the stamps."""


def send_one(url: str, stream: bool) -> tuple[str, Sent]:
    """One request from the openai SDK, on a fresh connection, with its own
    trace id: the trace id, and what the request took."""
    trace_id = secrets.token_hex(16)
    traceparent = {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-1234", max_retries=0) as client:
        started = time.perf_counter_ns()
        raw = client.chat.completions.with_raw_response.create(
            model="fake-openai-endpoint",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=stream,
            extra_headers=traceparent,
        )
        if stream:
            chunks = list(raw.parse())  # type: ignore[call-overload]
            client_ms = (time.perf_counter_ns() - started) / 1e6
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            # On failure, every chunk: which one went missing or out of order.
            assert text.startswith("tok"), [(c.id, c.choices[0].delta.content if c.choices else None) for c in chunks]
            return trace_id, Sent(True, client_ms, None)
        response = raw.parse()
        client_ms = (time.perf_counter_ns() - started) / 1e6
        assert response.choices[0].message.content.startswith("tok")  # type: ignore[union-attr]
        stamp = (response.model_extra or {}).get("perfkit")
        assert stamp is not None, "the mock's send stamp did not come through the proxy"
        received = int(raw.headers["llm_provider-x-perfkit-mock-received-ns"])
        return trace_id, Sent(False, client_ms, (stamp["mono_ns"] - received) / 1e6)


def send_traffic(url: str, n: int) -> dict[str, Sent]:
    """n non-streaming and n streaming requests (``send_one``), 16 at a time:
    with fewer, uvicorn's workers (sharing one socket) may leave one of them idle."""
    with ThreadPoolExecutor(16) as pool:
        return dict(pool.map(lambda i: send_one(url, stream=bool(i % 2)), range(2 * n)))


def send_calm(url: str, n: int) -> dict[str, Sent]:
    """n non-streaming requests one after another: nothing queues in the proxy
    behind another request, so their upstream stage is the mock's hold and
    the little it takes to reach the mock and read its answer."""
    return dict(send_one(url, stream=False) for _ in range(n))


def overhead_failures(attrs: dict[str, Any], sent: Sent) -> list[str]:
    """What of a non-streaming request's overhead parts contradicts the
    client's clock or the mock's stamps. The request lies inside the
    client's; the stages perfkit attributes run outside the upstream call, so
    outside the mock's hold (LiteLLM's during-call hooks may overlap it
    briefly: 1 ms). A stream gives no such bound: the SDK stops reading at
    its [DONE], and LiteLLM's stream goes on after it."""
    if sent.mock_hold_ms is None:
        return []
    failures = []
    if attrs["perfkit.total_ms"] > sent.client_ms:
        failures.append(f"total {attrs['perfkit.total_ms']:.3f} ms > the client's {sent.client_ms:.3f} ms")
    if attrs["perfkit.upstream_ms"] < sent.mock_hold_ms:
        failures.append(f"upstream {attrs['perfkit.upstream_ms']:.3f} ms < the mock's hold {sent.mock_hold_ms:.3f} ms")
    outside = sent.client_ms - sent.mock_hold_ms
    if attrs["perfkit.attributed_ms"] > outside + 1.0:
        failures.append(f"attributed {attrs['perfkit.attributed_ms']:.3f} ms > the {outside:.3f} ms outside the mock")
    return failures


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("version", VERSIONS)
def test_every_stage_is_recorded_in_every_worker(tmp_path: Path, version: str, workers: int) -> None:
    # 20 ms in the mock: more than the client's own time around a request,
    # so that an upstream call counted as the gateway's would show.
    sent: dict[str, Sent] = {}
    with (
        mock_process("--ttft-ms", "20", "--itl-ms", "1", "--chunks", "5") as upstream,
        otlp_receiver() as (endpoint, received),
    ):
        args = ("--endpoint", endpoint, "--protocol", "http/json")
        with litellm_proxy(version, upstream, tmp_path, workers=workers, perfkit_args=args) as url:
            # Workers share one listening socket; which one accepts is the
            # kernel's choice, so send rounds until every worker has answered.
            deadline, round_number = time.monotonic() + 90, 0
            while True:
                round_number += 1
                sent.update(send_traffic(url, 12))
                requests = requests_of(received, 24 * round_number)
                if (
                    len({s["pid"] for spans in requests.values() for s in spans}) >= workers
                    or time.monotonic() > deadline
                ):
                    break
            calm = send_calm(url, CALM_REQUESTS)
            sent.update(calm)
            requests = requests_of(received, 24 * round_number + CALM_REQUESTS)
    pids = set()
    upstream_ms: dict[str, float] = {}
    after_last_byte_ms: list[float] = []
    for trace_id, spans in requests.items():
        server = next(s for s in spans if s["kind"] == 2)
        pids.add(server["pid"])
        stages = {s["name"]: s for s in spans if s["kind"] == 1}
        expected = STREAM if server["attrs"]["perfkit.streaming"] else NON_STREAM
        assert expected <= set(stages), f"{trace_id}: missing {expected - set(stages)}"
        by_id = {s["spanId"]: s for s in spans}
        for name, span in stages.items():
            assert span["attrs"]["perfkit.stage.duration_ms"] > 0, name
            parent = span
            while parent["kind"] != 2:  # every stage nests inside its request's server span
                parent = by_id[parent["parentSpanId"]]
            assert parent is server
        assert stages["upstream"]["parentSpanId"] != server["spanId"]  # inside llm_call
        attrs = server["attrs"]
        assert FAST_PATH_KEYS <= set(attrs) and attrs["perfkit.litellm.version"] == version
        assert trace_id in sent, f"{trace_id}: a request the test did not send"
        failures = overhead_failures(attrs, sent[trace_id])
        assert not failures, (trace_id, failures, {k: v for k, v in attrs.items() if k.endswith("_ms")})
        upstream_ms[trace_id] = attrs["perfkit.upstream_ms"]
        # A guard, not a measurement: reconcile makes unattributed the rest of the total.
        parts = attrs["perfkit.upstream_ms"] + attrs["perfkit.attributed_ms"] + attrs["perfkit.unattributed_ms"]
        assert abs(attrs["perfkit.total_ms"] - parts) < 1e-6
        # The request ends at its last byte; LiteLLM's code after it (its middlewares' return) is named.
        after_last_byte_ms.append(attrs["perfkit.after_last_byte_ms"])
        if server["attrs"]["perfkit.streaming"]:
            assert attrs["perfkit.stream.chunks"] >= 5 and attrs["perfkit.stream.max_gap_ms"] > 0
    assert len(pids) == workers, f"spans came from {len(pids)} worker process(es)"
    after_last_byte_ms.sort()
    print(
        f"after the last byte, ms: median {after_last_byte_ms[len(after_last_byte_ms) // 2]:.3f}, max {after_last_byte_ms[-1]:.3f}"
    )
    # Under load the upstream stage also holds the proxy's queueing, so the
    # lower bound above is loose; the least disturbed calm request's is the
    # mock's hold within CALM_SLACK_MS, so an upstream stage that lost or
    # gained time to the gateway's stages shows.
    slack = {t: upstream_ms[t] - calm[t].mock_hold_ms for t in calm}  # type: ignore[operator]
    assert 0 <= min(slack.values()) <= CALM_SLACK_MS, sorted(slack.values())


JAEGER_STAGES = {"POST /v1/chat/completions", "auth", "llm_call", "upstream"}


def test_spans_reach_jaeger(tmp_path: Path, jaeger: Jaeger) -> None:
    service = "litellm-proxy-under-perfkit"
    with mock_process("--chunks", "3") as upstream:
        args = ("--endpoint", jaeger.otlp_http, "--protocol", "http/protobuf", "--service-name", service)
        with litellm_proxy(VERSIONS[-1], upstream, tmp_path, perfkit_args=args) as url:
            sent = send_traffic(url, 2)
            deadline = time.monotonic() + 30
            while True:  # until every request sent is in Jaeger with its stages, or the deadline
                # Jaeger drops a trace id's leading zeros.
                stored = {
                    t["traceID"].rjust(32, "0"): {s["operationName"] for s in t["spans"]}
                    for t in jaeger.traces(service)
                }
                if all(JAEGER_STAGES <= stored.get(t, set()) for t in sent) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
    missing = [t for t in sent if t not in stored]
    assert not missing, f"{len(missing)} of the {len(sent)} requests sent have no trace in Jaeger"
    for trace_id in sent:
        assert JAEGER_STAGES <= stored[trace_id], f"{trace_id}: missing {JAEGER_STAGES - stored[trace_id]}"


def test_a_missing_point_is_named_once_and_the_proxy_still_serves(tmp_path: Path) -> None:
    env = {"PERFKIT_EXTRA_STAGES": "my.hook=litellm.proxy.proxy_server:does_not_exist"}
    with mock_process() as upstream, otlp_receiver() as (endpoint, received):
        args = ("--endpoint", endpoint, "--protocol", "http/json")
        with litellm_proxy(VERSIONS[0], upstream, tmp_path, perfkit_args=args, env=env) as url:
            send_traffic(url, 2)
            requests = requests_of(received, 4)
    log = proxy_log(tmp_path)
    warnings = [line for line in log.splitlines() if "instrumentation point(s) not found" in line]
    assert len(warnings) == 1 and "litellm.proxy.proxy_server:does_not_exist" in warnings[0]
    assert all(any(s["name"] == "auth" for s in spans) for spans in requests.values())  # the rest still measured


SNAPSHOT = """
import json, sys, litellm
from litellm.proxy import proxy_server
from litellm.proxy.utils import ProxyLogging

def snapshot():
    state = {name: [repr(type(c)) if not isinstance(c, str) else c for c in getattr(litellm, name)]
             for name in ("callbacks", "success_callback", "failure_callback", "_async_success_callback",
                          "_async_failure_callback", "service_callback", "input_callback")}
    caps = getattr(ProxyLogging, "_callback_capabilities", None)
    if caps is not None:
        c = caps()
        state["capabilities"] = {k: v for k, v in vars(c).items() if isinstance(v, bool)}
    plo = proxy_server.proxy_logging_obj
    for name in ("needs_iterator_wrap", "needs_per_chunk_streaming_hook"):
        if hasattr(plo, name):
            state[name] = getattr(plo, name)()
    return state

before = snapshot()
import litellm_perfkit
report = litellm_perfkit.instrument()
after = snapshot()
litellm_perfkit.uninstrument()
print(json.dumps({"before": before, "after": after, "instrumented": len(report.instrumented)}))
"""


@pytest.mark.parametrize("version", VERSIONS)
def test_perfkit_registers_no_callback_and_changes_no_flag(version: str) -> None:
    python = litellm_python(version)
    result = subprocess.run(
        [str(python), "-c", SNAPSHOT], capture_output=True, text=True, env=litellm_env(), timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    state = orjson.loads(result.stdout.strip().splitlines()[-1])
    assert state["before"] == state["after"]
    assert state["instrumented"] >= 15


def test_sigterm_flushes_the_last_spans(tmp_path: Path) -> None:
    """uvicorn re-raises SIGTERM after its graceful shutdown, so atexit never
    runs: perfkit must flush at the app's lifespan shutdown. A 120 s export
    delay keeps every span queued until the proxy is told to stop (long: on a
    loaded machine the start-up and the requests outlast a few seconds)."""
    with mock_process("--ttft-ms", "2", "--chunks", "3") as upstream, otlp_receiver() as (endpoint, received):
        args = ("--endpoint", endpoint, "--protocol", "http/json")
        with litellm_proxy(
            "1.103.0", upstream, tmp_path, perfkit_args=args, env={"OTEL_BSP_SCHEDULE_DELAY": "120000"}
        ) as url:
            send_traffic(url, 5)
            assert not spans_of(received), "spans were exported before the stop: the delay did not hold them"
        # litellm_proxy's exit sent SIGTERM and waited for the process to end.
        requests = requests_of(received, 10, timeout_s=10)
    assert len(requests) == 10


def this_hosts_address() -> str:
    """An address of this machine that is not loopback (a UDP 'connect' sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))
        address = str(probe.getsockname()[0])
    assert not address.startswith("127."), "this machine has no address besides loopback: the test needs one"
    return address


def test_by_default_timings_go_only_to_loopback_and_holders_of_the_secret(tmp_path: Path) -> None:
    """Server-Timing tells a client how long auth took, and a valid key and a
    bad one take different paths: outside loopback it is sent only on request."""
    address = this_hosts_address()
    with mock_process("--ttft-ms", "2", "--chunks", "3") as upstream, otlp_receiver() as (endpoint, received):
        env = {"PERFKIT_HEADER_SECRET": "let-me-see"}
        with litellm_proxy(
            "1.103.0",
            upstream,
            tmp_path,
            perfkit_args=("--endpoint", endpoint, "--protocol", "http/json"),
            env=env,
            host=address,
        ) as url:
            body = {"model": "fake-openai-endpoint", "messages": MESSAGES}
            auth = {"Authorization": "Bearer sk-1234"}
            plain = httpx.post(f"{url}/v1/chat/completions", json=body, headers=auth, timeout=30)
            secret = httpx.post(
                f"{url}/v1/chat/completions", json=body, headers={**auth, "x-perfkit-secret": "let-me-see"}, timeout=30
            )
            requests_of(received, 2)
    assert plain.status_code == secret.status_code == 200
    assert "server-timing" not in plain.headers and "x-perfkit-overhead-ms" not in plain.headers
    assert "auth;dur=" in secret.headers["server-timing"] and float(secret.headers["x-perfkit-overhead-ms"]) > 0


def test_fast_path_attributes_name_what_a_releases_capability_cache_lacks() -> None:
    """Through LiteLLM's own ProxyLogging: a cache of 1.90's shape (no
    has_content_enforcer, no has_moderation_override) is read with its own
    table's fields, and read with 1.103's, the fields it lacks are named and
    what they decide is unknown: no internal error."""
    script = (
        "from types import SimpleNamespace\n"
        "from litellm.proxy.utils import ProxyLogging\n"
        "from litellm_perfkit._litellm._fastpath import FastPaths\n"
        "caps = SimpleNamespace(has_iterator_override=False, iterator_overrides=(), has_streaming_chunk_override=False,\n"
        "                       has_guardrail=False, has_pre_call_override=False, has_post_call_response_headers=False)\n"
        "ProxyLogging._callback_capabilities = staticmethod(lambda: caps)\n"
        "for table in ('<1.103', '>=1.103'):\n"
        "    attributes = FastPaths('1.90.0', table).attributes()\n"
        "    print(attributes['perfkit.litellm.pre_call_hooks'], attributes.get('perfkit.litellm.capabilities_unread', '-'))\n"
    )
    result = subprocess.run(
        [str(litellm_python("1.103.0")), "-c", script], capture_output=True, text=True, env=litellm_env(), timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-2:] == ["skipped -", "unknown has_content_enforcer,has_moderation_override"]
