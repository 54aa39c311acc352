"""Just enough of a protobuf reader to get labels and function names out of pprof profiles and pyroscope pushes."""

from __future__ import annotations

import gzip
from urllib.parse import parse_qs, urlsplit

from litellm_perfkit._wire._protobuf import fields


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


def _merge(into: dict[str, set[str]], more: dict[str, set[str]]) -> None:
    for key, values in more.items():
        into.setdefault(key, set()).update(values)


def pyroscope_pushes(bodies: dict[str, list[bytes]]) -> list[tuple[dict[str, set[str]], list[str]]]:
    """(labels, string table) of each profile pushed by pyroscope-io, in either wire format.

    0.8.x (what LiteLLM pins) POSTs a pprof to ``/ingest?name=<app>&format=pprof``
    with the tags as sample labels; 1.x POSTs a gzipped connect-protobuf
    ``push.v1.PushRequest`` {series = 1 {labels = 1 {name, value}, samples = 2
    {raw_profile = 1}}} to ``/push.v1.PusherService/Push`` with the tags as
    series labels.
    """
    pushes: list[tuple[dict[str, set[str]], list[str]]] = []
    for path, posted in bodies.items():
        parts = urlsplit(path)
        for body in posted:
            if parts.path == "/ingest":
                labels, strings = labels_and_strings(body)
                _merge(labels, {"__app__": set(parse_qs(parts.query)["name"])})
                pushes.append((labels, strings))
            elif parts.path == "/push.v1.PusherService/Push":
                request = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
                for number, series in fields(request):
                    if number != 1:
                        continue
                    labels, strings = {}, []
                    for field, value in fields(series):  # type: ignore[arg-type]
                        if field == 1:
                            pair = dict(fields(value))  # type: ignore[arg-type]
                            _merge(labels, {bytes(pair[1]).decode(): {bytes(pair.get(2, b"")).decode()}})  # type: ignore[arg-type]
                        elif field == 2:
                            sample = dict(fields(value))  # type: ignore[arg-type]
                            more, strings = labels_and_strings(sample[1])  # type: ignore[arg-type]
                            _merge(labels, more)
                    _merge(labels, {"__app__": labels.get("service_name", set())})
                    pushes.append((labels, strings))
            else:
                raise AssertionError(f"pyroscope-io pushed to an unknown path {path}")
    return pushes
