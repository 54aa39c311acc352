"""Spans reach a real Jaeger (OTLP over HTTP and gRPC) and read back with the right tree."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

import litellm_perfkit
from litellm_perfkit import PerfkitMiddleware
from tests.support import apps, costs_app
from tests.support.servers import Jaeger, uvicorn_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span["tags"]}


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json", "grpc"])
def test_spans_reach_jaeger_with_the_expected_tree(jaeger: Jaeger, protocol: str) -> None:
    service = f"perfkit-test-{protocol.replace('/', '-')}"
    endpoint = jaeger.otlp_grpc if protocol == "grpc" else jaeger.otlp_http
    trace_id = TRACE_ID[: -len(protocol)] + "0" * len(protocol)
    litellm_perfkit.configure(service_name=service, exporter="otlp", protocol=protocol, endpoint=endpoint)  # type: ignore[arg-type]
    try:
        with uvicorn_server(PerfkitMiddleware(apps.make_app())) as url:
            traceparent = f"00-{trace_id}-{CLIENT_SPAN}-01"
            sent = time.perf_counter()
            httpx.post(f"{url}/v1/chat/completions", json={}, headers={"traceparent": traceparent})
            client_ms = (time.perf_counter() - sent) * 1000
            httpx.post(f"{url}/v1/chat/completions", json={"stream": True})
    finally:
        litellm_perfkit.shutdown()

    traces = jaeger.wait_for_spans(service, count=5 + 5)
    joined = [t for t in traces if t["traceID"] == trace_id]
    assert len(joined) == 1, "the incoming traceparent's trace id is kept"
    spans = {s["operationName"]: s for s in joined[0]["spans"]}
    server = spans["POST /v1/chat/completions"]
    assert server["references"][0]["spanID"] == CLIENT_SPAN  # child of the client's span
    assert {"request.parse", "auth", "upstream", "serialize"} <= set(spans)
    for name in ("request.parse", "auth", "upstream", "serialize"):
        [ref] = spans[name]["references"]
        assert ref["refType"] == "CHILD_OF" and ref["spanID"] == server["spanID"]
        assert spans[name]["duration"] >= 0
    assert spans["upstream"]["duration"] >= 4000  # µs; the app sleeps 5 ms (uvloop timers may fire ~1 ms early)
    server_tags = tags(server)
    assert server_tags["span.kind"] == "server"
    assert server_tags["http.response.status_code"] == 200
    assert server_tags["perfkit.streaming"] is False
    # The upstream stage sleeps 5 ms (less uvloop's early timer); the request lies inside the client's.
    assert 4 <= server_tags["perfkit.upstream_ms"] <= server_tags["perfkit.total_ms"] <= client_ms, server_tags

    streamed = next(t for t in traces if t["traceID"] != trace_id)
    stream_spans = {s["operationName"]: s for s in streamed["spans"]}
    stream_tags = tags(stream_spans["POST /v1/chat/completions"])
    assert stream_tags["perfkit.streaming"] is True
    assert stream_tags["perfkit.chunks"] == apps.STREAM_CHUNKS + 1
    assert stream_tags["perfkit.first_token_ms"] > apps.FIRST_TOKEN_DELAY_S * 1000
    iterate = tags(stream_spans["stream.iterate"])
    assert iterate["perfkit.stage.kind"] == "generator" and iterate["perfkit.stage.items"] == apps.STREAM_CHUNKS + 2


@pytest.mark.integration
def test_each_overhead_part_read_back_is_at_least_its_injected_cost(jaeger: Jaeger) -> None:
    """Upstream, attributed and unattributed time against an app that spends
    known times in each (tests/support/costs_app.py), not against each other."""
    service = "perfkit-test-overhead-parts"
    litellm_perfkit.configure(
        service_name=service, exporter="otlp", protocol="http/protobuf", endpoint=jaeger.otlp_http
    )
    client_ms = {}
    try:
        with uvicorn_server(PerfkitMiddleware(costs_app.make_app())) as url, httpx.Client(base_url=url) as client:
            client.post("/v1/chat/completions", json={})  # connects: the requests timed below are the server's alone
            for n in range(3):
                trace_id = f"{n + 1:x}" + "5" * 31  # no leading zero: Jaeger drops them
                traceparent = f"00-{trace_id}-{CLIENT_SPAN}-01"
                sent = time.perf_counter()
                response = client.post("/v1/chat/completions", json={}, headers={"traceparent": traceparent})
                client_ms[trace_id] = (time.perf_counter() - sent) * 1000
                assert response.status_code == 200
    finally:
        litellm_perfkit.shutdown()

    traces = {t["traceID"]: t for t in jaeger.wait_for_spans(service, count=4 * (len(client_ms) + 1))}
    assert set(client_ms) <= set(traces), "every request's trace, by its traceparent"
    for trace_id, elapsed_ms in client_ms.items():
        [server] = [s for s in traces[trace_id]["spans"] if tags(s).get("span.kind") == "server"]
        attributes = tags(server)
        failures = costs_app.overhead_failures(attributes, elapsed_ms)
        assert not failures, (failures, attributes)
        # A guard, not a measurement: reconcile makes unattributed the rest of the total.
        parts = ("perfkit.upstream_ms", "perfkit.attributed_ms", "perfkit.unattributed_ms")
        assert sum(attributes[key] for key in parts) == pytest.approx(attributes["perfkit.total_ms"], abs=1e-6)
