"""Spans reach a real Jaeger (OTLP over HTTP and gRPC) and read back with the right tree."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import litellm_perfkit
from litellm_perfkit import PerfkitMiddleware
from tests.support import apps
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
            httpx.post(f"{url}/v1/chat/completions", json={}, headers={"traceparent": traceparent})
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
    total = server_tags["perfkit.total_ms"]
    parts = (
        server_tags["perfkit.upstream_ms"]
        + server_tags["perfkit.attributed_ms"]
        + server_tags["perfkit.unattributed_ms"]
    )
    assert parts == pytest.approx(total, abs=1e-6)

    streamed = next(t for t in traces if t["traceID"] != trace_id)
    stream_spans = {s["operationName"]: s for s in streamed["spans"]}
    stream_tags = tags(stream_spans["POST /v1/chat/completions"])
    assert stream_tags["perfkit.streaming"] is True
    assert stream_tags["perfkit.chunks"] == apps.STREAM_CHUNKS + 1
    assert stream_tags["perfkit.first_token_ms"] > apps.FIRST_TOKEN_DELAY_S * 1000
    iterate = tags(stream_spans["stream.iterate"])
    assert iterate["perfkit.stage.kind"] == "generator" and iterate["perfkit.stage.items"] == apps.STREAM_CHUNKS + 2
