"""A ground-truth gateway: known, injected delays per stage, in front of the mock.

    python -m tests.support.delay_gateway --port 4000 --upstream http://127.0.0.1:8000

Exports its spans per the OTEL_* variables (perfkit bench sets them).
"""

from __future__ import annotations

import argparse
import time

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import litellm_perfkit
from litellm_perfkit import stage

# Injected delays (ms); time.sleep, not loop timers, for sub-ms precision.
DELAYS_MS = {"auth": 2.0, "pre_call": 1.0, "route": 0.5, "serialize": 1.5}


def build(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=60)

    async def chat(request: Request) -> Response:
        body = await request.body()
        for name in ("auth", "pre_call", "route"):
            with stage(name):
                time.sleep(DELAYS_MS[name] / 1000)
        async with stage("upstream"):
            response = await client.send(
                client.build_request("POST", "/v1/chat/completions", content=body), stream=True
            )
        if response.headers.get("content-type", "").startswith("text/event-stream"):

            async def relay():  # type: ignore[no-untyped-def]
                async for chunk in response.aiter_raw():
                    yield chunk
                await response.aclose()

            return StreamingResponse(relay(), media_type="text/event-stream")
        data = await response.aread()
        with stage("serialize"):
            time.sleep(DELAYS_MS["serialize"] / 1000)
        return Response(data, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    litellm_perfkit.configure()
    app = litellm_perfkit.PerfkitMiddleware(build(args.upstream))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
