"""The sdk exporter: the host's own OpenTelemetry SDK pipeline gets perfkit's spans.
Runs in its own process: a tracer provider is set once per process."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._core import _guard
from litellm_perfkit._export._settings import ExportSettings
from litellm_perfkit._export._transport import make_exporter

ROOT = Path(__file__).resolve().parents[2]

HOST = textwrap.dedent(
    """
    import asyncio, json, sys

    import httpx
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)

    import litellm_perfkit
    from tests.support import apps

    pipeline = litellm_perfkit.configure()  # no exporter chosen: the host's SDK gets the spans
    app = litellm_perfkit.PerfkitMiddleware(apps.make_app())

    async def main():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            for _ in range(2):
                assert (await client.post("/v1/chat/completions", json={})).status_code == 200

    asyncio.run(main())
    litellm_perfkit.shutdown()
    spans = memory.get_finished_spans()
    print(json.dumps({"exporter": pipeline.settings.exporter, "mode": pipeline.mode, "spans": [
        {"name": s.name, "kind": s.kind.name, "trace": s.context.trace_id, "id": s.context.span_id,
         "parent": s.parent.span_id if s.parent else None, "attributes": dict(s.attributes)} for s in spans]}))
    """
)


def test_the_hosts_in_memory_exporter_receives_perfkits_spans() -> None:
    result = subprocess.run([sys.executable, "-c", HOST], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = orjson.loads(result.stdout.strip().splitlines()[-1])
    assert (document["exporter"], document["mode"]) == ("sdk", "thread")
    spans = document["spans"]
    servers = [s for s in spans if s["kind"] == "SERVER"]
    assert len(servers) == 2 and all(s["name"] == "POST /v1/chat/completions" for s in servers)
    for server in servers:
        stages = {s["name"]: s for s in spans if s["trace"] == server["trace"] and s["kind"] == "INTERNAL"}
        assert {"request.parse", "auth", "upstream", "serialize"} <= set(stages)
        assert all(s["parent"] == server["id"] for s in stages.values())
        assert server["attributes"]["perfkit.total_ms"] > 0


def test_without_the_sdk_the_sdk_exporter_is_one_line_naming_the_extra(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # import raises ImportError
    monkeypatch.setattr(_guard, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        assert make_exporter(ExportSettings(exporter="sdk")) is None
        assert make_exporter(ExportSettings(exporter="sdk")) is None
    assert [r.getMessage() for r in caplog.records] == [
        "perfkit: OTEL_TRACES_EXPORTER=sdk needs the OpenTelemetry SDK (pip install 'litellm_perfkit[sdk]'); "
        "spans are not exported"
    ]


def test_the_span_processors_come_from_the_providers_public_tracer() -> None:
    """No private attribute of the SDK: a provider whose own processors are
    hidden still hands them to its tracers."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from litellm_perfkit._export._sdk import SdkExporter
    from litellm_perfkit._export._spans import SPAN_KIND_SERVER

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter = SdkExporter(provider)
    span = ("ab" * 16, "cd" * 8, "", "GET /", SPAN_KIND_SERVER, 1_000, 2_000, [("perfkit.total_ms", 1.0)], 0, "")
    assert exporter.export_spans([span]) is True
    (finished,) = memory.get_finished_spans()
    assert (finished.name, finished.context.span_id, finished.start_time) == ("GET /", int("cd" * 8, 16), 1_000)
