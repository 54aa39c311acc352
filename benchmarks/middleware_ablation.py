"""Where PerfkitMiddleware's time per request goes: turn one part off at a time.

The app and driver are benchmarks/middleware_overhead.py's (ASGI called
directly, no sockets), with no exporter (the request path alone), pinned to
core 0. Each variant removes one part; its saving is what that part costs
inside the running app, which is about twice what the same code costs in a
timeit loop. Variants run interleaved, ``--repeats`` times; medians.

- ``no headers``: ``server_timing="off", overhead_header="off"``
- ``pass-through body``: ``send`` only handles the response start and marks
  the end; no SSE scan, no first token, no counting
- ``no stages``: the app's four ``stage()`` blocks removed (bare still runs
  them, as no-ops outside a request)
- ``raw receive``: the app gets the server's ``receive`` (no disconnect
  detection)

    python -m benchmarks.middleware_ablation [--workload stream|json] [--requests 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.middleware_overhead as overhead  # noqa: E402
from litellm_perfkit import PerfkitMiddleware  # noqa: E402
from litellm_perfkit._core import _middleware  # noqa: E402
from litellm_perfkit._core._timeline import TIMELINE, Timeline  # noqa: E402


class _PassThroughBody(_middleware._Exchange):
    __slots__ = ()

    def send(self, message: Any) -> Any:
        if message["type"] == "http.response.start":
            message = self._on_start(message)
        elif not message.get("more_body", False):
            self._complete = True
        return self._send(message)


class _RawReceive(PerfkitMiddleware):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        timeline = Timeline(perf_counter_ns(), scope["method"], scope["path"])
        exchange = _middleware._Exchange(self, timeline, receive, send)
        token = TIMELINE.set(timeline)
        try:
            await self.app(scope, receive, exchange.send)
        finally:
            TIMELINE.reset(token)
            exchange.finish()


VARIANTS: dict[str, tuple[Callable[[], Any], tuple[Any, str, Any] | None]] = {
    "bare": (overhead.make_app, None),
    "perfkit": (lambda: PerfkitMiddleware(overhead.make_app()), None),
    "no headers": (lambda: PerfkitMiddleware(overhead.make_app(), server_timing="off", overhead_header="off"), None),
    "pass-through body": (lambda: PerfkitMiddleware(overhead.make_app()), (_middleware, "_Exchange", _PassThroughBody)),
    "no stages": (lambda: PerfkitMiddleware(overhead.make_app()), (overhead, "four_stages", lambda last: None)),
    "raw receive": (lambda: _RawReceive(overhead.make_app()), None),
}


def run(name: str, path: str, requests: int) -> float:
    build, patch = VARIANTS[name]
    original = None
    if patch is not None:
        target, attribute, value = patch
        original = getattr(target, attribute)
        setattr(target, attribute, value)
    try:
        app = build()
        asyncio.run(overhead.drive(app, path, 300))  # warm-up
        started = time.perf_counter()
        asyncio.run(overhead.drive(app, path, requests))
        return (time.perf_counter() - started) / requests * 1e6
    finally:
        if patch is not None:
            setattr(patch[0], patch[1], original)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("stream", "json"), default="stream")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {0})
    path = "/stream" if args.workload == "stream" else "/json"
    names = list(VARIANTS)
    times: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            times[name].append(run(name, path, args.requests))
    bare, ours = statistics.median(times["bare"]), statistics.median(times["perfkit"])
    print(f"{args.workload}: {args.requests} requests x {args.repeats} interleaved repeats, core 0, no exporter; medians\n")
    print("| variant | µs per request | added vs bare | saving vs perfkit |")
    print("|---|---:|---:|---:|")
    for name in names:
        median = statistics.median(times[name])
        print(f"| {name} | {median:.1f} | {median - bare:+.1f} | {ours - median:+.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
