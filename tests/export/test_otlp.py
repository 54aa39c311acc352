"""The hand-written encoders agree with the official OTLP protobuf classes."""

from __future__ import annotations

import random
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
    assert {
        a.key: a.value.string_value
        for a in ExportTraceServiceRequest.FromString(overridden).resource_spans[0].resource.attributes
    }["service.instance.id"] == "pod-7"  # OTEL_RESOURCE_ATTRIBUTES wins
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


def test_the_c_span_encoder_writes_what_the_python_one_writes() -> None:
    from litellm_perfkit._export._otlp import _spans_protobuf_python
    from tests.support import backends

    encode = backends.load("c").speedups.encode_spans  # type: ignore[union-attr]
    spans = sample_spans()
    assert encode(spans) == _spans_protobuf_python(spans)
    rng = random.Random(7)
    values: list[object] = [
        True,
        False,
        0,
        -1,
        127,
        128,
        -(1 << 63),
        (1 << 63) - 1,
        0.0,
        -2.5,
        1e300,
        "",
        "é" * 70,
        "x" * 200,
    ]
    for _ in range(300):
        attributes = [
            (rng.choice(["a", "perfkit.stage.cpu_ms", "k" * 130]), rng.choice(values))
            for _ in range(rng.randrange(0, 12))
        ]
        span = (
            f"{rng.getrandbits(128):032x}",
            f"{rng.getrandbits(64):016x}",
            rng.choice(["", f"{rng.getrandbits(64):016X}"]),
            rng.choice(["auth", "POST /chat/completions", "n" * 140]),
            rng.randrange(0, 6),
            rng.getrandbits(63),
            rng.getrandbits(63),
            attributes,
            rng.choice([0, 2]),
            rng.choice(["", "RuntimeError", "m" * 150]),
        )
        assert encode([span]) == _spans_protobuf_python([span]), span  # type: ignore[list-item]
    assert encode([]) == b""


def test_the_c_span_encoder_declines_what_it_does_not_write() -> None:
    from tests.support import backends

    encode = backends.load("c").speedups.encode_spans  # type: ignore[union-attr]
    span = sample_spans()[0]
    for attribute in (("big", 1 << 64), ("none", None), ("list", [1])):
        assert encode([(*span[:7], [attribute], *span[8:])]) is None
    assert encode([("xyz", *span[1:])]) is None  # not a hex trace id
    # And spans_protobuf then encodes them in Python.
    assert ExportTraceServiceRequest.FromString(spans_protobuf([(*span[:7], [("big", 1 << 64)], *span[8:])], "svc", {}))


def test_stage_spans_encoded_for_a_protobuf_exporter_are_the_spans_encoded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """What the processor hands an exporter that posts protobuf (the server span, then its stages'
    spans already encoded) makes the request the spans themselves make, on random records."""
    from litellm_perfkit._core._timeline import decode
    from litellm_perfkit._export import _spans
    from litellm_perfkit._export._otlp import encode_stage_spans
    from tests.support.timelines import sample_timeline

    for seed in range(50):
        record = decode(sample_timeline(random.Random(seed)).encode())
        monkeypatch.setattr(_spans, "_bits", random.Random(seed).getrandbits)  # the same random ids both ways
        spans = _spans.record_to_spans(record, "ab" * 16, "", 1_700_000_000_000_000_000)
        monkeypatch.setattr(_spans, "_bits", random.Random(seed).getrandbits)
        server, stages = _spans.request_spans(record, "ab" * 16, "", 1_700_000_000_000_000_000)
        items = [server, encode_stage_spans(stages)]
        assert spans_protobuf(items, "svc", {}) == spans_protobuf(spans, "svc", {}), seed
    assert len(
        ExportTraceServiceRequest.FromString(spans_protobuf(items, "svc", {})).resource_spans[0].scope_spans[0].spans
    ) == len(spans)


def test_the_processor_hands_a_protobuf_exporter_encoded_stage_spans_and_counts_every_span() -> None:
    from litellm_perfkit._core._timeline import decode
    from litellm_perfkit._export._processor import Processor
    from litellm_perfkit._export._settings import ExportSettings
    from tests.support.timelines import sample_timeline

    class Exporter:
        def __init__(self, span_form: str) -> None:
            self.span_form = span_form
            self.batches: list[list[object]] = []

        def export_spans(self, spans: list[object]) -> bool:
            self.batches.append(spans)
            return True

        def export_metrics(self, store: object, start: int, now: int) -> bool:
            return True

        def close(self) -> None:
            pass

    records = [decode(sample_timeline(random.Random(seed)).encode()) for seed in range(20)]
    counts = {}
    for form in ("tuples", "protobuf"):
        exporter = Exporter(form)
        processor = Processor(ExportSettings(max_batch=64), exporter)  # type: ignore[arg-type]
        for record in records:
            processor.handle(record, 0)
        processor.flush_spans()
        items = [item for batch in exporter.batches for item in batch]
        assert any(isinstance(item, bytes) for item in items) == (form == "protobuf")
        decoded = ExportTraceServiceRequest.FromString(spans_protobuf(items, "svc", {}))
        assert processor.exported_spans == len(decoded.resource_spans[0].scope_spans[0].spans)
        counts[form] = processor.exported_spans
    assert counts["tuples"] == counts["protobuf"] == sum(1 + len(record.stages) for record in records)
