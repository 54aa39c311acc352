"""The mock as an ASGI app, to mount inside another app or serve with uvicorn.

Same engine and same responses as the standalone server; timing uses
``asyncio.sleep`` to each event's offset, so it is as precise as the host loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .._wire._names import CONTENT_TYPE_HEADER, MOCK_PROCESSING_HEADER, MOCK_RECEIVED_HEADER
from ..types import Receive, Scope, Send
from ._config import Deployment, MockConfig
from ._engine import MockEngine, Plan

__all__ = ["MockApp"]


class MockApp:
    def __init__(self, config: MockConfig | None = None, deployment: Deployment | None = None) -> None:
        self.config = config or MockConfig()
        self.engine = MockEngine(self.config, deployment or self.config.deployments[0])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        received = time.perf_counter_ns()
        query = scope.get("query_string", b"").decode("latin-1")
        plan = self.engine.plan(
            scope["method"], f"{scope['path']}?{query}" if query else scope["path"], b"".join(chunks)
        )
        await self._execute(plan, received, send)

    async def _execute(self, plan: Plan, received_ns: int, send: Send) -> None:
        if plan.action == "hang":
            await asyncio.sleep(plan.hang_s)
            return
        if plan.action == "disconnect" and not plan.streaming:
            raise ConnectionAbortedError("perfkit mock: injected disconnect")
        assert plan.render is not None

        async def sleep_until(offset_s: float) -> None:
            delay = offset_s - (time.perf_counter_ns() - received_ns) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)

        def start(length: int | None, delay_s: float) -> dict[str, Any]:
            headers = [(CONTENT_TYPE_HEADER.encode(), plan.content_type), *plan.headers]
            processing = max(0, time.perf_counter_ns() - received_ns - int(delay_s * 1e9))
            headers.append((MOCK_PROCESSING_HEADER.encode(), b"%.3f" % (processing / 1e6)))
            headers.append((MOCK_RECEIVED_HEADER.encode(), b"%d" % received_ns))
            if length is not None:
                headers.append((b"content-length", b"%d" % length))
            return {"type": "http.response.start", "status": plan.status, "headers": headers}

        if plan.offsets_s is None:
            await sleep_until(plan.at_s)
            body = plan.render(0)
            await send(start(len(body), plan.at_s))
            await send({"type": "http.response.body", "body": body})
            return
        await send(start(None, 0.0))
        for seq, offset in enumerate(plan.offsets_s):
            await sleep_until(offset)  # a cut comes when its event was due, as in the standalone server
            if plan.action == "disconnect" and seq >= plan.disconnect_after:
                raise ConnectionAbortedError("perfkit mock: injected mid-stream disconnect")
            await send({"type": "http.response.body", "body": plan.render(seq), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
