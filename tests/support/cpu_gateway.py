"""A ground-truth gateway for the time split: each stage burns a known amount
of CPU (the thread's own CPU clock) and awaits a known delay.

    python -m tests.support.cpu_gateway --port 4000 --jsonl spans.jsonl [--cpu-scale 20]

Runs on uvloop, as LiteLLM's proxy does; its spans go to ``--jsonl``.
``--cpu-scale`` multiplies the CPU each stage burns (the delays stay).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import litellm_perfkit
from litellm_perfkit import stage

# name: (CPU burned, delay awaited), ms
COSTS_MS = {"auth": (2.0, 0.0), "pre_call": (1.0, 3.0), "upstream": (0.0, 10.0), "serialize": (1.5, 0.0)}
_cpu_scale = 1.0  # --cpu-scale


def burn(ms: float) -> None:
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


async def work(request: Request) -> Response:
    await request.body()
    for name, (cpu_ms, wait_ms) in COSTS_MS.items():
        async with stage(name):
            burn(cpu_ms * _cpu_scale)
            if wait_ms:
                await asyncio.sleep(wait_ms / 1000)
    return Response(b"{}", media_type="application/json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jsonl", required=True)
    parser.add_argument("--cpu-scale", type=float, default=1.0)
    args = parser.parse_args()
    global _cpu_scale
    _cpu_scale = args.cpu_scale
    litellm_perfkit.configure(exporter="jsonl", jsonl_path=args.jsonl)
    app = litellm_perfkit.PerfkitMiddleware(Starlette(routes=[Route("/work", work, methods=["POST"])]))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", loop="uvloop")


if __name__ == "__main__":
    main()
