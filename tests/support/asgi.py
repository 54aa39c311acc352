"""ASGI messages for tests that call a middleware or an app directly, without a server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


def http_scope(
    method: str = "POST",
    path: str = "/v1/chat/completions",
    headers: list[tuple[bytes, bytes]] | None = None,
    client: tuple[str, int] = ("127.0.0.1", 1),
    **more: Any,
) -> dict[str, Any]:
    """An HTTP request's scope; ``more`` adds keys (``server``, ``query_string``...)."""
    return {"type": "http", "method": method, "path": path, "headers": headers or [], "client": client, **more}


async def one_body(body: bytes = b"{}") -> dict[str, Any]:
    """A ``receive`` whose request body comes in one message."""
    return {"type": "http.request", "body": body, "more_body": False}


async def no_body() -> dict[str, Any]:
    """A ``receive`` whose request has no body."""
    return {"type": "http.request", "body": b"", "more_body": False}


async def discard(message: dict[str, Any]) -> None:
    """A ``send`` that keeps nothing."""
    return None


def keeping() -> tuple[list[dict[str, Any]], Callable[[dict[str, Any]], Awaitable[None]]]:
    """A ``send`` that keeps every message, and the list it keeps them in."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    return sent, send
