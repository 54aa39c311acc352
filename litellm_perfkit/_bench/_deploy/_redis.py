"""A private Redis for the proxy's shared state (router state, rate limits,
cache): ``redis-server`` on a free port of 127.0.0.1, nothing written to disk,
stopped with the run's ``Children``."""

from __future__ import annotations

import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from .._launch import Child, Children, free_port
from ._postgres import DeployError

__all__ = ["Redis", "start_redis"]


@dataclass(frozen=True)
class Redis:
    port: int
    child: Child

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"


def _pong(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as connection:
        connection.sendall(b"PING\r\n")
        return connection.recv(16).startswith(b"+PONG")


def start_redis(children: Children, home: Path, timeout_s: float = 30.0) -> Redis:
    server = shutil.which("redis-server")
    if server is None:
        raise DeployError("the redis deployment needs redis-server: install it (Debian: apt-get install redis-server)")
    port = free_port()
    command = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--dir", str(home)]
    child = children.start(f"redis-{port}", command, cwd=home, log_path=home / f"redis-{port}.log")
    child.wait_ready(lambda: _pong(port), timeout_s)
    return Redis(port, child)
