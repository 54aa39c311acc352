"""One trace with a host that traces: a Starlette app running the OpenTelemetry
SDK and its ASGI instrumentation, PerfkitMiddleware inside, both exporting to
a real Jaeger. The host runs in its own process: a tracer provider is set
once per process, and would change every other test's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from litellm_perfkit._core._hosttrace import HOST_TRACING
from tests.support.servers import Jaeger

HOST = textwrap.dedent(
    """
    import sys, threading, time

    import httpx, uvicorn
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    import litellm_perfkit
    from litellm_perfkit import stage

    endpoint, service = sys.argv[1], sys.argv[2]
    provider = TracerProvider(resource=Resource.create({"service.name": service + "-host"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("host")

    async def chat(request):
        with stage("auth"):
            with tracer.start_as_current_span("host.lookup"):
                pass
        with stage("upstream"):
            time.sleep(0.002)
        return JSONResponse({"ok": True})

    app = OpenTelemetryMiddleware(litellm_perfkit.PerfkitMiddleware(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])))
    litellm_perfkit.configure(service_name=service, exporter="otlp", protocol="http/json", endpoint=endpoint)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    for _ in range(3):  # no traceparent, as the OpenAI SDK sends none
        assert httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={}).status_code == 200
    server.should_exit = True
    thread.join()
    litellm_perfkit.shutdown()
    provider.shutdown()
    """
)


def test_no_tracer_provider_costs_one_comparison() -> None:
    """In this process nobody set a provider: the middleware stays off the host path."""
    assert HOST_TRACING.refresh(0) is False and HOST_TRACING.active is False


@pytest.mark.integration
@pytest.mark.parametrize("speedups", ["on", "off"])
def test_perfkit_joins_the_hosts_trace_in_jaeger(jaeger: Jaeger, speedups: str) -> None:
    service = f"perfkit-hosttrace-{speedups}"
    result = subprocess.run(
        [sys.executable, "-c", HOST, jaeger.otlp_http, service],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PERFKIT_SPEEDUPS": speedups},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    traces = [
        t
        for t in jaeger.wait_for_spans(service, count=3 * 5)
        if any(p["serviceName"] == service for p in t["processes"].values())
    ]
    assert len(traces) == 3, f"{len(traces)} traces for 3 requests"
    for found in traces:
        spans = {s["spanID"]: s for s in found["spans"]}
        roots = [s for s in spans.values() if not s["references"]]
        assert len(roots) == 1, Counter(s["operationName"] for s in roots)
        service_of = {s["spanID"]: found["processes"][s["processID"]]["serviceName"] for s in spans.values()}
        # The host's SERVER span is the root; perfkit's request span is its child.
        perfkit_server = next(
            s
            for s in spans.values()
            if service_of[s["spanID"]] == service
            and s["references"][0]["spanID"]
            not in {x["spanID"] for x in spans.values() if service_of[x["spanID"]] == service}
        )
        assert service_of[roots[0]["spanID"]] == f"{service}-host"
        parent = spans[perfkit_server["references"][0]["spanID"]]
        assert service_of[parent["spanID"]] == f"{service}-host"
        by_name = {s["operationName"]: s for s in spans.values() if service_of[s["spanID"]] == service}
        for name in ("auth", "upstream"):
            assert by_name[name]["references"][0]["spanID"] == perfkit_server["spanID"]
        # A span the host opens inside stage("auth") is auth's child: the stage is the current span while it runs.
        lookup = next(s for s in spans.values() if s["operationName"] == "host.lookup")
        assert lookup["references"][0]["spanID"] == by_name["auth"]["spanID"]
