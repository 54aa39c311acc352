"""A backend that accepts connections, reads what is sent, and never answers."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Hung:
    url: str
    asked: threading.Event = field(default_factory=threading.Event)  # set once a request head has arrived
    received: list[bytes] = field(default_factory=list)


@contextlib.contextmanager
def hung_server() -> Iterator[Hung]:
    """Yields the server; its connections are closed, unanswered, when the block ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    hung = Hung(f"http://127.0.0.1:{listener.getsockname()[1]}")
    held: list[socket.socket] = []
    stop = threading.Event()

    def read(connection: socket.socket) -> None:
        data = b""
        while not stop.is_set():
            try:
                chunk = connection.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            data += chunk
            if b"\r\n\r\n" in data:
                hung.received.append(data)
                hung.asked.set()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            threading.Thread(target=read, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield hung
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        listener.close()
        for connection in held:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()
