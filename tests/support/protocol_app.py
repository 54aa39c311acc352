"""A small app instrumented with perfkit, for tests/test_readme_install.py.

It runs in a venv holding only the README's install (no test packages), as
``perfkit run [export flags] -- python protocol_app.py REQUESTS [--hold]``:
``configure()`` reads the export settings ``perfkit run`` set. It sends
REQUESTS chat requests through PerfkitMiddleware in process (an ASGI app
with an ``auth`` and an ``upstream`` stage), flushes, prints ``flushed``, and
with ``--hold`` waits until its stdin closes, so that the test can scrape
``/metrics`` from ``perfkit run --prometheus-port`` meanwhile.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import MutableMapping
from typing import Any

import litellm_perfkit
from litellm_perfkit import PerfkitMiddleware, stage


async def app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    with stage("auth"):
        await asyncio.sleep(0)
    with stage("upstream"):
        await asyncio.sleep(0.002)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def send_requests(count: int) -> None:
    middleware = PerfkitMiddleware(app)
    for _ in range(count):
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/chat/completions",
            "headers": [(b"content-type", b"application/json")],
            "client": ("127.0.0.1", 5000),
        }
        messages: list[MutableMapping[str, Any]] = [{"type": "http.request", "body": b"{}", "more_body": False}]

        async def receive(messages: list[MutableMapping[str, Any]] = messages) -> MutableMapping[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            return None

        await middleware(scope, receive, send)


def main() -> None:
    count, hold = int(sys.argv[1]), "--hold" in sys.argv[2:]
    litellm_perfkit.configure()
    asyncio.run(send_requests(count))
    litellm_perfkit.shutdown()
    print("flushed", flush=True)
    if hold:
        sys.stdin.read()


if __name__ == "__main__":
    main()
