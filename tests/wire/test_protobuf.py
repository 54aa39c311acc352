"""The wire-format reader against messages written by hand and by protobuf itself."""

from __future__ import annotations

import struct

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from litellm_perfkit._wire._protobuf import fields


def test_each_wire_type_is_read() -> None:
    message = (
        b"\x08\x96\x01"  # 1: varint 150 (two bytes)
        + b"\x12\x03abc"  # 2: length-delimited
        + b"\x19"
        + struct.pack("<d", 2.5)  # 3: fixed64
        + b"\x25"
        + struct.pack("<I", 7)  # 4: fixed32
    )
    assert list(fields(message)) == [(1, 150), (2, b"abc"), (3, struct.pack("<d", 2.5)), (4, struct.pack("<I", 7))]


def test_a_message_protobuf_wrote_reads_back() -> None:
    written = KeyValue(key="perfkit.stage.cpu_ms", value=AnyValue(int_value=-3)).SerializeToString()
    key, value = list(fields(written))
    assert key == (1, b"perfkit.stage.cpu_ms")
    assert list(fields(value[1])) == [(3, (1 << 64) - 3)]  # type: ignore[arg-type]  # int64: two's complement


@pytest.mark.parametrize("broken", [b"\x08", b"\x08\x96", b"\x12\x05ab", b"\x19\x00", b"\x0b"])
def test_truncated_or_unknown_input_is_refused(broken: bytes) -> None:
    with pytest.raises(ValueError):
        list(fields(broken))
