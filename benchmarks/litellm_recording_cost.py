"""What recording a request costs the LiteLLM proxy, in one process, finely interleaved.

Whole-proxy comparisons (benchmarks/litellm_overhead.py) differ by 5% between
runs of the same configuration on this machine, which hides changes of a
tenth of a millisecond. This benchmark removes most of that noise: one
instrumented LiteLLM proxy app (``perfkit run``'s bootstrap, ``--exporter
none``) runs in one process, driven through ASGI in-process (httpx's
ASGITransport: no sockets, no uvicorn, so no ``protocol`` stage) against the
mock on another core. Each round sends one batch of concurrent requests
with every request recorded, and one with every request passed through
(the middleware's record ratio switched between 1 and 0, in ABBA order),
and charges each batch the process's CPU time until its work after the
response has ended. The marginal cost of recording is the median over
rounds of recorded minus passed-through, per request, with a 95% interval
from order statistics. Passing through costs what ``perfkit run
--record-ratio 0`` costs (docs/overhead.md: not measurable), so this is
what one recorded request adds to the proxy's own process; the export
agent's share is not in it.

    python -m benchmarks.litellm_recording_cost --version 1.103.0 --rounds 200
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_INNER = "--inner"


def interval(differences: list[float]) -> tuple[float, float, float]:
    """Median and its 95% interval from order statistics."""
    ordered = sorted(differences)
    n = len(ordered)
    half = 1.96 * (n**0.5) / 2
    low, high = max(0, int(n / 2 - half)), min(n - 1, int(n / 2 + half))
    return statistics.median(ordered), ordered[low], ordered[high]


def _find_middleware(app: Any) -> Any:
    from litellm_perfkit import PerfkitMiddleware

    seen = app.middleware_stack
    while seen is not None and not isinstance(seen, PerfkitMiddleware):
        seen = getattr(seen, "app", None)
    if seen is None:
        raise SystemExit("perfkit's middleware is not in the proxy's stack: was it started under the bootstrap?")
    return seen


async def _inner(args: argparse.Namespace) -> None:
    import httpx
    from litellm.proxy import proxy_server

    app = proxy_server.app
    startup: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})
    started = asyncio.get_running_loop().create_future()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if not started.done():
            started.set_result(message["type"])

    lifespan = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, startup.get, lifespan_send))
    if await started != "lifespan.startup.complete":
        raise SystemExit(f"the proxy did not start: {started.result()}")
    body = {"model": args.model, "messages": [{"role": "user", "content": "hi " * 150}], "stream": args.workload == "stream"}
    headers = {"Authorization": "Bearer sk-1234"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("127.0.0.1", 1234)), base_url="http://proxy") as client:

        async def one() -> None:
            response = await client.post("/v1/chat/completions", json=body, headers=headers)
            if response.status_code != 200:
                raise SystemExit(f"the proxy answered {response.status_code}: {response.text[:300]}")

        async def batch() -> float:
            before = time.process_time()
            await asyncio.gather(*(one() for _ in range(args.batch)))
            # The work after the response (logging tasks, the hand-off's hold) ends within this.
            await asyncio.sleep(args.settle)
            return (time.process_time() - before) / args.batch * 1e3

        await batch()
        middleware = _find_middleware(app)
        modes = {"recorded": None, "passed": 0.0}
        for _ in range(args.warmup):
            for ratio in modes.values():
                middleware._record_ratio = ratio
                await batch()
        results: dict[str, list[float]] = {name: [] for name in modes}
        for round_ in range(args.rounds):
            order = list(modes.items()) if round_ % 2 == 0 else list(modes.items())[::-1]
            for name, ratio in order:
                middleware._record_ratio = ratio
                results[name].append(await batch())
    lifespan.cancel()
    differences = [a - b for a, b in zip(results["recorded"], results["passed"])]
    median, low, high = interval(differences)
    passed = statistics.median(results["passed"])
    print(f"{args.workload}: passed through {passed:.3f} ms CPU per request, recorded {statistics.median(results['recorded']):.3f}; "
          f"recording adds {median * 1e3:.1f} us per request (95% interval {low * 1e3:.1f} to {high * 1e3:.1f}), "
          f"{median / passed * 100:.1f}% of the request")  # fmt: skip


def _outer(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from litellm_perfkit._bench import CONFIG_TEMPLATE
    from litellm_perfkit._bench._venvs import OFFLINE_ENV
    from litellm_perfkit._cli._run import BOOTSTRAP
    from tests.support.litellm_env import litellm_python
    from tests.support.mock_server import mock_process

    python = args.python or litellm_python(args.version)
    os.sched_setaffinity(0, {1})  # the mock here, on core 1; the proxy on core 0
    with tempfile.TemporaryDirectory() as tmp, mock_process("--chunks", "20") as upstream:
        config = Path(tmp) / "config.yaml"
        config.write_text(CONFIG_TEMPLATE.replace("{upstream}", upstream))
        env = {**os.environ, **OFFLINE_ENV, "CONFIG_FILE_PATH": str(config), "PERFKIT_RUN": "1",
               "PYTHONPATH": os.pathsep.join((str(BOOTSTRAP), str(BOOTSTRAP.parents[2]))),
               "PERFKIT_OTEL_TRACES_EXPORTER": "none", "PERFKIT_LEAVE_OUT": args.leave_out}  # fmt: skip
        print(f"LiteLLM {args.version}, in-process (ASGI), core 0; batches of {args.batch} concurrent requests, "
              f"{args.rounds} rounds after {args.warmup} warm-up rounds" + (f"; left out: {args.leave_out}" if args.leave_out else ""))  # fmt: skip
        for workload in args.workloads.split(","):
            command = ["taskset", "-c", "0", str(python), __file__, _INNER, "--workload", workload]
            for name in ("rounds", "batch", "warmup", "settle"):
                command += [f"--{name}", str(getattr(args, name))]
            subprocess.run(command, env=env, check=True, cwd=tmp)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(_INNER, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--version", default="1.103.0")
    parser.add_argument("--workloads", default="json", help="json, stream or both (comma-separated)")
    parser.add_argument("--workload", default="json", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16, help="concurrent requests per batch")
    parser.add_argument("--warmup", type=int, default=20, help="rounds not counted")
    parser.add_argument("--settle", type=float, default=0.02, help="seconds each batch waits for its work after the response")
    parser.add_argument("--python", type=Path, help="the proxy's interpreter (default: --version's cached venv, built if missing); "
                        "this checkout's perfkit runs in it either way")  # fmt: skip
    parser.add_argument("--leave-out", default="", help="PERFKIT_LEAVE_OUT for the proxy (docs/configuration.md)")
    parser.add_argument("--model", default="fake-openai-endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        import uvloop

        uvloop.run(_inner(args))
        return 0
    return _outer(args)


if __name__ == "__main__":
    sys.exit(main())
