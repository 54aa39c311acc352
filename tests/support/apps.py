"""A small Starlette gateway-like app with known stages and a known stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from litellm_perfkit import stage as default_stage
from litellm_perfkit._core._stage import Stage

ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
DONE = b"data: [DONE]\n\n"
STREAM_CHUNKS = 20  # content chunks; plus the role chunk: 21 data events
STREAM_BYTES = len(ROLE) + STREAM_CHUNKS * len(TOKEN) + len(DONE)
FIRST_TOKEN_DELAY_S = 0.03

events: dict[str, list[str]] = {"stream_closed": []}


def make_app(stage: type[Stage] = default_stage) -> Starlette:
    """The app, its stages recorded with ``stage`` (a backend's Stage class)."""

    @stage("auth")
    async def auth(request: Request) -> None:
        await asyncio.sleep(0.001)

    async def chat(request: Request) -> Response:
        body = await request.body()
        with stage("request.parse"):
            payload = orjson.loads(body) if body else {}
        await auth(request)
        async with stage("upstream"):
            await asyncio.sleep(0.005)
        if payload.get("stream"):
            return StreamingResponse(stream(float(payload.get("gap_s", 0.0))), media_type="text/event-stream")
        with stage("serialize"):
            data = orjson.dumps({"id": "x", "choices": [{"message": {"content": "RESPONSE_BODY_SECRET"}}]})
        return Response(data, media_type="application/json")

    @stage("stream.iterate")
    async def stream(gap_s: float) -> AsyncIterator[bytes]:
        try:
            yield ROLE
            await asyncio.sleep(FIRST_TOKEN_DELAY_S)
            for _ in range(STREAM_CHUNKS):
                yield TOKEN
                if gap_s:
                    await asyncio.sleep(gap_s)
            yield DONE
        finally:
            events["stream_closed"].append("closed")

    async def boom(request: Request) -> Response:
        with stage("auth"):
            pass
        raise RuntimeError("app failure")

    async def plain(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/boom", boom),
            Route("/plain", plain),
        ]
    )
