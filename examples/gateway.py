"""A minimal OpenAI-compatible gateway, instrumented with perfkit.

It forwards /v1/chat/completions to UPSTREAM (default http://127.0.0.1:8000)
and marks its stages, the way a real gateway (LiteLLM) is instrumented.

    UPSTREAM=http://127.0.0.1:8000 uvicorn examples.gateway:app --port 4000
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import litellm_perfkit
from litellm_perfkit import stage

UPSTREAM = os.environ.get("UPSTREAM", "http://127.0.0.1:8000")
KEYS = {"sk-1234"}
client = httpx.AsyncClient(base_url=UPSTREAM, timeout=60, limits=httpx.Limits(max_connections=1000))


@stage("auth")
async def authenticate(request: Request) -> bool:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    return token in KEYS


@stage("stream.iterate")
async def relay(upstream: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    finally:
        await upstream.aclose()


async def chat(request: Request) -> Response:
    with stage("request.parse"):
        body = orjson.loads(await request.body())
    if not await authenticate(request):
        return JSONResponse({"error": {"message": "bad key", "type": "auth_error"}}, status_code=401)
    with stage("route"):
        upstream_request = client.build_request("POST", "/v1/chat/completions", content=orjson.dumps(body))
    async with stage("upstream"):
        upstream = await client.send(upstream_request, stream=True)
    if body.get("stream"):
        return StreamingResponse(relay(upstream), media_type="text/event-stream")
    data = await upstream.aread()
    with stage("serialize"):
        return Response(data, status_code=upstream.status_code, media_type="application/json")


app = litellm_perfkit.PerfkitMiddleware(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]))
if os.environ.get("OTEL_TRACES_EXPORTER") or os.environ.get("PERFKIT_JSONL_PATH"):
    litellm_perfkit.configure()
