"""A server that answers each path with fixed bytes: malformed answers on purpose."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Iterator, Mapping


def chunked(*parts: bytes, end: bool = True) -> bytes:
    body = b"".join(b"%x\r\n%b\r\n" % (len(part), part) for part in parts)
    return body + (b"0\r\n\r\n" if end else b"")


def response(status: int, content_type: str, body: bytes, *, streamed: bool = True) -> bytes:
    head = f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n"
    head += "transfer-encoding: chunked\r\n" if streamed else f"content-length: {len(body)}\r\n"
    return (head + "connection: close\r\n\r\n").encode() + body


@contextlib.contextmanager
def raw_server(answers: Mapping[str, bytes]) -> Iterator[str]:
    """Serves ``answers[first path segment]`` and closes the connection; yields the base URL."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = self.request.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:
                body += self.request.recv(65536)
            path = head.split(b" ")[1].decode()
            self.request.sendall(answers[path.strip("/").split("/")[0]])
            self.request.shutdown(socket.SHUT_WR)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
