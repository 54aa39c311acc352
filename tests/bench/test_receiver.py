"""The bench's receiver reads both OTLP/HTTP encodings the same way."""

from __future__ import annotations

import http.client

import pytest

from litellm_perfkit._bench._receiver import SpanReceiver, decode_json, decode_protobuf
from litellm_perfkit._export._otlp import spans_json, spans_protobuf
from tests.export.test_otlp import sample_spans


def test_protobuf_and_json_bodies_decode_to_the_same_spans() -> None:
    spans = sample_spans()
    from_protobuf = decode_protobuf(spans_protobuf(spans, "svc", {}))
    from_json = decode_json(spans_json(spans, "svc", {}))
    assert from_protobuf == from_json
    server = from_protobuf[0]
    assert server["attrs"]["negative"] == -5 and server["attrs"]["big"] == 1 << 62
    assert server["attrs"]["flag"] is False and server["attrs"]["ratio"] == 0.25
    assert server["trace_id"] == "ab" * 16 and server["parent"] == "cd" * 8 and isinstance(server["pid"], int)
    assert [span["parent"] for span in from_protobuf[1:]] == [server["span_id"]] * 2


def test_a_truncated_protobuf_body_is_refused() -> None:
    body = spans_protobuf(sample_spans(), "svc", {})
    with pytest.raises(ValueError):
        decode_protobuf(body[:-3])


def _field(number: int, payload: bytes) -> bytes:
    return bytes((number << 3 | 2, len(payload))) + payload


def _with_a_two_byte_double() -> bytes:
    """A request whose one attribute's AnyValue.double_value (4) is length-delimited: 2 bytes, not 8."""
    key_value = _field(1, b"k") + _field(2, _field(4, b"\x01\x02"))
    return _field(1, _field(2, _field(2, _field(9, key_value))))


def test_bodies_are_kept_as_they_come_and_decoded_when_taken() -> None:
    spans = sample_spans()
    with SpanReceiver() as receiver:
        port = int(receiver.endpoint.rsplit(":", 1)[1])
        posted = [
            ("application/x-protobuf", spans_protobuf(spans, "svc", {}), 200),
            ("application/json", spans_json(spans, "svc", {}), 200),
            ("application/x-protobuf", b"\x0a\xff", 200),  # broken: counted when taken
            ("application/x-protobuf", _with_a_two_byte_double(), 200),
            ("text/plain", b"spans", 415),
        ]
        for content_type, body, status in posted:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("POST", "/v1/traces", body, {"Content-Type": content_type})
            assert connection.getresponse().status == status
            connection.close()
        taken = receiver.take()
        assert len(taken) == 2 * len(spans) and receiver.rejected == 2
        assert receiver.take() == [] and receiver.rejected == 0
