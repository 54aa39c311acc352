"""Run a callback when an ASGI app's lifespan has shut down.

uvicorn re-raises SIGTERM after a graceful shutdown, so the process then dies
by the signal and ``atexit`` hooks never run: whatever must happen at the end
of a worker (flush the last spans, write profiles) hooks in here as well.
"""

from __future__ import annotations

from collections.abc import Callable

from ..types import ASGIApp, Message, Receive, Scope, Send
from ._guard import internal_error

__all__ = ["OnShutdown"]


class OnShutdown:
    """Pure ASGI: calls ``callback`` just before the app reports its lifespan shutdown."""

    def __init__(self, app: ASGIApp, callback: Callable[[], None]) -> None:
        self.app = app
        self.callback = callback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_after_callback(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                try:
                    self.callback()
                except Exception as exc:
                    internal_error("lifespan.shutdown", exc)
            await send(message)

        await self.app(scope, receive, send_after_callback)
