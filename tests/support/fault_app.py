"""A small instrumented gateway for the fault matrix: it relays chat
completions to an upstream (the mock), with a few stages, and counts the
requests it served itself, outside perfkit, as the ground truth that
perfkit's own count is checked against.

    python -m tests.support.fault_app --port 4000 --upstream http://127.0.0.1:8000 --count-file n.txt [--plain]

``--plain``: the same app without perfkit (no middleware, no ``configure()``),
whose responses the instrumented one's must equal. Export follows the
OTEL_* variables; ``PERFKIT_PROMETHEUS_DIR`` gets its health counts at exit
(SIGTERM: uvicorn's graceful shutdown), and ``--count-file`` its own count.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import litellm_perfkit
from litellm_perfkit import stage
from litellm_perfkit._core._lifespan import OnShutdown

UPSTREAM_TIMEOUT_S = 0.5


def build(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=UPSTREAM_TIMEOUT_S)

    async def chat(request: Request) -> Response:
        body = await request.body()
        with stage("auth"):
            request.headers.get("authorization")
        async with stage("upstream"):
            try:
                response = await client.send(
                    client.build_request("POST", "/v1/chat/completions", content=body), stream=True
                )
            except httpx.TimeoutException:
                return Response(b'{"error":"upstream timed out"}', status_code=504, media_type="application/json")
        if response.headers.get("content-type", "").startswith("text/event-stream"):

            async def relay() -> AsyncIterator[bytes]:
                try:
                    async for chunk in response.aiter_raw():
                        yield chunk
                finally:
                    await response.aclose()

            return StreamingResponse(relay(), status_code=response.status_code, media_type="text/event-stream")
        try:
            data = await response.aread()
        except httpx.HTTPError:
            return Response(b'{"error":"upstream failed"}', status_code=502, media_type="application/json")
        with stage("serialize"):
            content = bytes(data)
        return Response(content, status_code=response.status_code, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


class Counted:
    """The outermost layer: every HTTP request the server handed the app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


_HEAD_BUFFER = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--count-file", required=True)
    parser.add_argument("--plain", action="store_true")
    args = parser.parse_args()
    app: Any = build(args.upstream)
    if not args.plain:
        litellm_perfkit.configure()
        app = litellm_perfkit.PerfkitMiddleware(app)  # which flushes the export at the lifespan's end
    counted = Counted(app)
    count_file = Path(args.count_file)

    def write_count() -> None:
        count_file.write_text(str(counted.requests))

    uvicorn.run(
        OnShutdown(counted, write_count),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        # The hostile probes' heads (64 KB, 10,000 headers) reach the app however uvicorn's reads
        # split them: past h11's default 16 KB, a head read in pieces is refused before any app.
        h11_max_incomplete_event_size=_HEAD_BUFFER,
    )


if __name__ == "__main__":
    main()
