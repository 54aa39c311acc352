"""LiteLLM's own ``otel`` callback on, under ``perfkit run``: one trace per request, in a real Jaeger.

LiteLLM sets an OpenTelemetry SDK tracer provider when its callback loads;
perfkit sees it (within a second), makes its request span and then each
stage the current span, and LiteLLM's spans, which take the active span as
their parent, nest under perfkit's stages.
"""

from __future__ import annotations

import time
from pathlib import Path

import openai
import pytest

from litellm_perfkit._bench import CONFIG_TEMPLATE
from tests.support.litellm_env import VERSIONS, with_packages
from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy
from tests.support.servers import Jaeger

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

PERFKIT_SERVICE = "perfkit-with-litellm-otel"
LITELLM_SERVICE = "litellm-otel-callback"


def test_litellm_spans_and_perfkits_share_one_trace_per_request(tmp_path: Path, jaeger: Jaeger) -> None:
    version = VERSIONS[-1]
    # LiteLLM's otel callback needs the SDK and its OTLP/HTTP exporter; litellm[proxy] brings only the API.
    with_packages(
        version,
        {
            "opentelemetry.sdk": "opentelemetry-sdk=={api}",
            "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http=={api}",
        },
    )
    config = CONFIG_TEMPLATE.replace("general_settings:", 'litellm_settings:\n  callbacks: ["otel"]\ngeneral_settings:')
    env = {
        "OTEL_EXPORTER": "otlp_http",
        "OTEL_ENDPOINT": f"{jaeger.otlp_http}/v1/traces",
        "OTEL_SERVICE_NAME": LITELLM_SERVICE,
    }
    args = ("--endpoint", jaeger.otlp_http, "--protocol", "http/protobuf", "--service-name", PERFKIT_SERVICE)
    with (
        mock_process("--chunks", "3") as upstream,
        litellm_proxy(version, upstream, tmp_path, perfkit_args=args, env=env, config=config) as url,
    ):
        with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-1234", max_retries=0) as client:
            client.chat.completions.create(model="fake-openai-endpoint", messages=[{"role": "user", "content": "hi"}])
            time.sleep(1.5)  # perfkit notices LiteLLM's tracer provider within a second
            for _ in range(3):  # no traceparent, as the OpenAI SDK sends none
                client.chat.completions.create(
                    model="fake-openai-endpoint", messages=[{"role": "user", "content": "hi"}]
                )
        traces = jaeger.wait_for_spans(LITELLM_SERVICE, count=3, timeout_s=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            # Complete traces: LiteLLM's batch processor sends its request span last.
            joined = [
                t
                for t in jaeger.traces(PERFKIT_SERVICE)
                if {p["serviceName"] for p in t["processes"].values()} >= {PERFKIT_SERVICE, LITELLM_SERVICE}
                and any(s["operationName"] == "Received Proxy Server Request" for s in t["spans"])
            ]
            if len(joined) >= 3:
                break
            time.sleep(0.5)
    assert len(joined) >= 3, f"{len(joined)} traces hold both services' spans; LiteLLM's traces: {len(traces)}"
    for found in joined:
        spans = {s["spanID"]: s for s in found["spans"]}
        service_of = {i: found["processes"][s["processID"]]["serviceName"] for i, s in spans.items()}
        parent_of = {i: s["references"][0]["spanID"] if s["references"] else None for i, s in spans.items()}
        roots = [i for i, parent in parent_of.items() if parent is None]
        assert len(roots) == 1, [spans[i]["operationName"] for i in roots]
        # LiteLLM's FastAPI instrumentation opens the SERVER span outside every middleware: perfkit's request span is its child.
        [request] = [
            i for i in spans if service_of[i] == PERFKIT_SERVICE and spans[i]["operationName"].startswith("POST ")
        ]
        assert parent_of[request] in (None, roots[0])
        # Every other LiteLLM span hangs under one of perfkit's: the request span, or the stage that was current.
        for span_id in spans:
            if service_of[span_id] != LITELLM_SERVICE or span_id == roots[0]:
                continue
            chain = parent_of[span_id]
            while chain is not None and service_of.get(chain) == LITELLM_SERVICE and chain != roots[0]:
                chain = parent_of[chain]
            assert chain is not None and service_of.get(chain) == PERFKIT_SERVICE, spans[span_id]["operationName"]
        # LiteLLM's own request span starts in auth, and is auth's child.
        [received] = [i for i in spans if spans[i]["operationName"] == "Received Proxy Server Request"]
        assert (
            spans[parent_of[received]]["operationName"] == "auth" and service_of[parent_of[received]] == PERFKIT_SERVICE
        )
