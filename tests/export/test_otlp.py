"""The hand-written encoders agree with the official OTLP protobuf classes."""

from __future__ import annotations

import time

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from litellm_perfkit._core._backend import ACTIVE
from litellm_perfkit._export._otlp import spans_json, spans_protobuf
from litellm_perfkit._export._spans import record_to_spans


def sample_spans() -> list:  # type: ignore[type-arg]
    timeline = ACTIVE.timeline(time.perf_counter_ns(), "POST", "/v1/chat/completions")
    now = time.perf_counter_ns()
    timeline.finished.append((0, "auth", now, now + 1000, -1))
    timeline.next_index = 1
    timeline.add_generator_time("stream.iterate", timeline.start_ns, 1234, 21)
    timeline.status, timeline.error = 500, "RuntimeError"
    timeline.attributes["perfkit.litellm.version"] = 'x"1\n'
    timeline.attributes["negative"] = -5
    # Every value kind, and fields past one length byte (the encoder's short cuts).
    timeline.attributes.update({"big": 1 << 62, "flag": False, "ratio": 0.25, "long." + "k" * 150: "v" * 300})
    timeline.gc_pause_ns = 380_500_000  # a full collection inside the request
    timeline.end_ns = time.perf_counter_ns()
    return record_to_spans(timeline.freeze(), "ab" * 16, "cd" * 8, 1_700_000_000_000_000_000)


def test_protobuf_and_json_encodings_decode_to_the_same_request() -> None:
    spans = sample_spans()
    encoded = spans_protobuf(spans, "svc", {"deployment.environment": "t"})
    assert spans_protobuf(spans, "svc", {"deployment.environment": "t"}) == encoded  # from the encoder's caches
    from_protobuf = ExportTraceServiceRequest.FromString(encoded)
    from_json = ExportTraceServiceRequest()
    request = orjson.loads(spans_json(spans, "svc", {"deployment.environment": "t"}))
    # protobuf's JSON parser reads bytes as base64; OTLP/JSON writes ids as hex.
    import base64

    for resource_spans in request["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    json_format.ParseDict(request, from_json)
    assert from_protobuf == from_json
    resource = {a.key: a.value.string_value for a in from_protobuf.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "svc" and resource["deployment.environment"] == "t"
    assert len(resource["service.instance.id"]) == 36  # one per worker, a UUID
    overridden = spans_protobuf(spans, "svc", {"service.instance.id": "pod-7"})
    assert {a.key: a.value.string_value for a in ExportTraceServiceRequest.FromString(overridden).resource_spans[0].resource.attributes}[
        "service.instance.id"] == "pod-7"  # OTEL_RESOURCE_ATTRIBUTES wins  # fmt: skip
    server, auth, iterate = from_protobuf.resource_spans[0].scope_spans[0].spans
    assert server.status.code == 2 and server.status.message == "RuntimeError"
    assert server.parent_span_id.hex() == "cd" * 8 and auth.parent_span_id == server.span_id
    attributes = {a.key: a.value for a in server.attributes}
    assert attributes["negative"].int_value == -5 and attributes["big"].int_value == 1 << 62
    assert attributes["flag"].bool_value is False and attributes["ratio"].double_value == 0.25
    assert attributes["long." + "k" * 150].string_value == "v" * 300
    assert attributes["perfkit.litellm.version"].string_value == 'x"1\n'
    assert attributes["perfkit.gc_pause_ms"].double_value == 380.5
    assert {a.key: a.value.int_value for a in iterate.attributes}["perfkit.stage.items"] == 21
