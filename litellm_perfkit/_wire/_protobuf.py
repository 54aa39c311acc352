"""Protobuf's wire format, no schema: the fields of one message, and a varint.

The bench's receiver reads OTLP trace requests with it, and the tests read
pprof profiles; both know their own field numbers. perfkit's OTLP encoders
(spans' Python reference, metrics) write their varints with ``varint``.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["fields", "varint"]


def varint(value: int) -> bytes:
    """A non-negative int as a protobuf varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def fields(message: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field: an int for a varint, bytes for the
    other wire types (a nested message, a string, a fixed64 or fixed32)."""
    position, end = 0, len(message)
    while position < end:
        key, position = _varint(message, position)
        wire_type = key & 7
        value: int | bytes
        if wire_type == 0:
            value, position = _varint(message, position)
        elif wire_type == 2:
            size, position = _varint(message, position)
            value, position = message[position : position + size], position + size
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            value, position = message[position : position + size], position + size
        else:
            raise ValueError(f"protobuf wire type {wire_type} is not one a message field has")
        if position > end:
            raise ValueError("truncated protobuf message")
        yield key >> 3, value


def _varint(message: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(message):
            raise ValueError("truncated protobuf varint")
        byte = message[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
