"""Just enough of a protobuf reader to get labels and function names out of a pprof profile."""

from __future__ import annotations

import gzip
from collections.abc import Iterator


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, int or bytes) for each field of one message."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, value
        elif wire == 2:
            length, i = _varint(data, i)
            yield number, data[i : i + length]
            i += length
        elif wire == 1:
            yield number, data[i : i + 8]
            i += 8
        elif wire == 5:
            yield number, data[i : i + 4]
            i += 4
        else:
            raise ValueError(f"wire type {wire}")


def labels_and_strings(body: bytes) -> tuple[dict[str, set[str]], list[str]]:
    """({label key: values} over all samples, string table) of a (gzipped) pprof Profile."""
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    strings: list[str] = []
    samples: list[bytes] = []
    for number, value in fields(body):
        if number == 6:  # string_table
            strings.append(bytes(value).decode())  # type: ignore[arg-type]
        elif number == 2:  # sample
            samples.append(value)  # type: ignore[arg-type]
    labels: dict[str, set[str]] = {}
    for sample in samples:
        for number, value in fields(sample):
            if number == 3:  # Label {key = 1, str = 2}
                label = dict(fields(value))  # type: ignore[arg-type]
                labels.setdefault(strings[label[1]], set()).add(strings[label.get(2, 0)])  # type: ignore[index]
    return labels, strings
