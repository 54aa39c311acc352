"""The ASGI scope a server hands an app for one HTTP request, for the benchmarks that drive an app
in-process without one."""

from __future__ import annotations

from typing import Any

__all__ = ["http_scope"]


def http_scope(method: str, path: str, headers: list[tuple[bytes, bytes]], server: str = "127.0.0.1") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1234),
        "server": (server, 80),
    }
