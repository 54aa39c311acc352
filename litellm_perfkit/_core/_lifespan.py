"""Run a callback when an ASGI app's lifespan has shut down.

uvicorn re-raises SIGTERM after a graceful shutdown, so the process then dies
by the signal and ``atexit`` hooks never run: whatever must happen at the end
of a worker (flush the last spans, write profiles) hooks in here as well.
"""

from __future__ import annotations

from collections.abc import Callable

from ..types import ASGIApp, Message, Receive, Scope, Send
from ._guard import internal_error

__all__ = ["OnShutdown", "calling_at_shutdown"]


class OnShutdown:
    """Pure ASGI: calls ``callback`` just before the app reports its lifespan shutdown."""

    def __init__(self, app: ASGIApp, callback: Callable[[], None]) -> None:
        self.app = app
        self.callback = callback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, calling_at_shutdown(send, self.callback))


def calling_at_shutdown(send: Send, callback: Callable[[], None]) -> Send:
    """The lifespan's ``send``, calling ``callback`` once the app has shut down,
    before the server hears so (and ends the process)."""

    async def send_after_callback(message: Message) -> None:
        if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            try:
                callback()
            except Exception as exc:
                internal_error("lifespan.shutdown", exc)
        await send(message)

    return send_after_callback
