"""Fixed requests whose answers are compared, byte for byte, between an app
with perfkit and the same app without it.

Each probe is sent raw on its own connection (``Connection: close``) and
read to EOF, so that hostile requests (a 64 KB header, 10,000 headers,
invalid UTF-8 in the path) go out as written. What differs between any two
answers whatever perfkit does is masked: the ``Date`` header, perfkit's own
timing headers, the mock's per-request stamps and ids (it numbers its
answers and stamps each with its send time) and a chunked body's framing
(the body is de-chunked).
"""

from __future__ import annotations

import re
import socket
import sys
from dataclasses import dataclass

from litellm_perfkit._wire._names import MOCK_PROCESSING_HEADER, MOCK_RECEIVED_HEADER, OVERHEAD_HEADERS

__all__ = ["HOSTILE", "PROBES", "Answer", "Probe", "refused_before_any_app", "send", "send_past_refusals"]

_CHAT = '{"model":"fake-openai-endpoint","messages":[{"role":"user","content":"probe"}]%s}'
_MASKED_HEADERS = {"date", "server-timing", MOCK_PROCESSING_HEADER, MOCK_RECEIVED_HEADER, *OVERHEAD_HEADERS}
_VOLATILE = re.compile(rb'"(id|created|mono_ns|unix_ns)":("[^"]*"|\d+)')


@dataclass(frozen=True)
class Probe:
    name: str
    path: bytes = b"/v1/chat/completions"
    body: bytes = (_CHAT % "").encode()
    headers: tuple[tuple[bytes, bytes], ...] = ()


@dataclass(frozen=True)
class Answer:
    status_line: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


PROBES = (
    Probe("json"),
    Probe("stream", body=(_CHAT % ',"stream":true').encode()),
)
HOSTILE = (
    Probe("64 KB header", headers=((b"x-big", b"a" * 65536),)),
    Probe("10,000 headers", headers=tuple((b"x-h%d" % i, b"v") for i in range(10_000))),
    Probe("invalid UTF-8 path", path=b"/v1/chat/\xff\xfe/completions"),
    Probe("bad traceparent", headers=((b"traceparent", b"00-zz-not-a-trace-\xff"),)),
    Probe("64 KB traceparent", headers=((b"traceparent", b"00-" + b"f" * 65536),)),
)


def _dechunk(body: bytes) -> bytes:
    out, at = bytearray(), 0
    while at < len(body):
        end = body.find(b"\r\n", at)
        if end < 0:
            return bytes(out) + b"<cut>"  # the connection ended mid-body
        size = int(body[at:end].split(b";")[0] or b"0", 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        at = end + 4 + size
    return bytes(out) + b"<cut>"


def send(host: str, port: int, probe: Probe, timeout_s: float = 30.0) -> Answer:
    """The probe's answer, masked; a refused or cut connection is an answer too."""
    head = [b"POST " + probe.path + b" HTTP/1.1", b"host: " + host.encode(), b"content-type: application/json"]
    head += [b"authorization: Bearer sk-1234", b"content-length: %d" % len(probe.body), b"connection: close"]
    head += [name + b": " + value for name, value in probe.headers]
    raw = b""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as connection:
            connection.sendall(b"\r\n".join(head) + b"\r\n\r\n" + probe.body)
            while chunk := connection.recv(65536):
                raw += chunk
    except ConnectionResetError:
        raw += b"<reset>"
    except TimeoutError:
        raw += b"<timed out>"
    header_end = raw.find(b"\r\n\r\n")
    if header_end < 0:
        return Answer(raw[:200], (), b"")
    lines = raw[:header_end].split(b"\r\n")
    headers = tuple(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(b":") for line in lines[1:])
        if name.strip().lower().decode(errors="replace") not in _MASKED_HEADERS
        and name.strip().lower() != b"content-length"  # the masked stamps change the length
    )
    body = raw[header_end + 4 :]
    if (b"transfer-encoding", b"chunked") in headers:
        body = _dechunk(body)
    return Answer(lines[0], headers, _VOLATILE.sub(rb'"\1":0', body))


_REFUSED = b"Invalid HTTP request received."  # uvicorn's own 400, before any app
_SENDS_WHILE_REFUSED = 10


def refused_before_any_app(answer: Answer) -> bool:
    """uvicorn's own 400 for a request head h11 would not buffer: no app, perfkit included, saw it."""
    return answer.status_line.endswith(b" 400 Bad Request") and answer.body.startswith(_REFUSED)


def send_past_refusals(host: str, port: int, probe: Probe) -> Answer:
    """``send``, again while uvicorn refuses the request before any app sees it. uvicorn refuses a
    request head past h11's 16 KB buffer when its read gets the head in pieces, which depends on when
    it reads (a bare ASGI app behind uvicorn 0.33 refused 1 of 30 sends of the 10,000 headers;
    uvicorn 0.54 refused 4 in a row on a loaded machine). Sent up to 10 times, in the runs with and
    without perfkit alike: the answer compared is the app's when it can be."""
    refused = refused_before_any_app
    answer, sends = send(host, port, probe), 1
    while refused(answer) and sends < _SENDS_WHILE_REFUSED:
        answer, sends = send(host, port, probe), sends + 1
    if sends > 1 and not refused(answer):
        print(f"  probe {probe.name!r}: refused by uvicorn before the app {sends - 1} time(s)", file=sys.stderr)
    return answer
