"""What PerfkitMiddleware adds per request, against bare and OpenTelemetry ASGI.

One process drives the same trivial Starlette app through ASGI directly (no
sockets, so only middleware and export cost differ). Every request's spans are
exported over OTLP/HTTP (protobuf) to a local Jaeger; each timed run ends with
a flush, so export work is inside the measurement. Variants run interleaved,
``--repeats`` times; the table shows medians.

perfkit ``process`` mode exports from a child agent: its CPU per request is
shown separately (``agent CPU``), never hidden. ``perfkit-noexport`` is the
middleware with no exporter configured: the request path alone, so the
difference to ``perfkit-process`` is what export costs the app (the hand-off
to the agent, and sharing two cores with the agent and Jaeger).

With two or more cores (``--pin on``, the default), the app runs on core 0
and Jaeger and the export agent on core 1, so the app's CPU time is its own
work and not the scheduler moving it between cores; the agent's CPU is still
shown apart. Unpinned runs of the same code spread by ±10%; pinned, ±2%.

``--measure instructions`` counts instead of timing: each variant runs under
valgrind (cachegrind) twice, with N and 4N requests, and the difference of
the instruction totals divided by 3N is the instructions per request, with
start-up and imports cancelled out. It is deterministic, so it resolves
what this noisy machine's timings cannot; it counts the app process only
(the export agent is not traced).

    python -m benchmarks.middleware_overhead [--requests 3000] [--repeats 5] [--pin on|off]
    python -m benchmarks.middleware_overhead --measure instructions [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import litellm_perfkit
from litellm_perfkit import PerfkitMiddleware, stage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._pinning import pin  # noqa: E402
from tests.support.servers import jaeger_process  # noqa: E402

CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'


def four_stages(last: str) -> None:
    for name in ("auth", "pre_call", "upstream", last):
        with stage(name):
            pass


async def json_endpoint(request: Request) -> Response:
    four_stages("serialize")
    return JSONResponse({"ok": True})


async def stream_endpoint(request: Request) -> Response:
    four_stages("headers")

    async def body() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield CHUNK
        yield b"data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")


def make_app() -> Starlette:
    return Starlette(routes=[Route("/json", json_endpoint), Route("/stream", stream_endpoint)])


async def drive(app: Any, path: str, n: int) -> None:
    headers = [(b"host", b"bench"), (b"user-agent", b"bench")]

    async def send(message: dict[str, Any]) -> None:
        return None

    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for _ in range(n):
        delivered = False

        async def receive() -> dict[str, Any]:
            # Like a server: the body once, then wait (no disconnect ever comes).
            nonlocal delivered
            if delivered:
                await never
            delivered = True
            return {"type": "http.request", "body": b"", "more_body": False}

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 1234),
            "server": ("127.0.0.1", 80),
        }
        await app(scope, receive, send)


APP_CORE, EXPORT_CORE = {0}, {1}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Variant:
    """Sets up one way of serving the app, and flushes its exporter."""

    def __init__(self, name: str, endpoint: str, pinned: bool = False) -> None:
        self.name = name
        self.pinned = pinned
        self.endpoint = endpoint
        self.app: Any = None
        self.flush: Callable[[], None] = lambda: None
        self.close: Callable[[], None] = lambda: None
        self.finish: Callable[[], None] = lambda: None
        self.agent_pid: int | None = None

    def open(self) -> None:
        app = make_app()
        if self.name == "bare":
            self.app = app
        elif self.name == "perfkit-noexport":
            # The request path alone: timelines go nowhere (no pipeline, the
            # core's sink discards), so export and its hand-off cost nothing.
            self.app = PerfkitMiddleware(app)
        elif self.name.startswith("perfkit"):
            mode = "process" if "process" in self.name else "thread"
            pipeline = litellm_perfkit.configure(
                service_name=f"bench-{self.name}", exporter="otlp", protocol="http/protobuf", endpoint=self.endpoint, mode=mode
            )
            self.app = PerfkitMiddleware(app)
            # The agent works in parallel in its own process; its CPU is reported apart.
            self.flush = lambda: pipeline.force_flush(until="handed_off")
            self.finish = pipeline.force_flush
            self.close = litellm_perfkit.shutdown
            agent = getattr(pipeline, "_agent", None)
            self.agent_pid = agent.process.pid if agent else None
            if self.pinned and self.agent_pid:
                pin(self.agent_pid, EXPORT_CORE)  # it inherited the app's core
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=Resource.create({"service.name": f"bench-{self.name}"}))
            provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{self.endpoint}/v1/traces"), max_queue_size=100_000)
            )
            exclude = ["receive", "send"] if "exclude" in self.name else None
            self.app = OpenTelemetryMiddleware(app, tracer_provider=provider, exclude_spans=exclude)
            self.flush = lambda: provider.force_flush(60_000)
            self.close = provider.shutdown

    def run(self, path: str, n: int) -> tuple[float, float, float]:
        """Per request: (app-process CPU us, agent CPU us, wall us), export flushed.

        CPU is the honest cost: in process mode the wall time can include
        waiting for the agent's backlog when the app outruns it."""
        agent_before = cpu_seconds(self.agent_pid) if self.agent_pid else 0.0
        cpu_before = time.process_time()
        started = time.perf_counter()
        asyncio.run(drive(self.app, path, n))
        self.flush()
        wall = (time.perf_counter() - started) / n * 1e6
        cpu = (time.process_time() - cpu_before) / n * 1e6
        self.finish()
        agent = (cpu_seconds(self.agent_pid) - agent_before) / n * 1e6 if self.agent_pid else 0.0
        return cpu, agent, wall


VARIANTS = ["bare", "perfkit-process", "perfkit-thread", "perfkit-noexport", "otel-asgi", "otel-asgi-exclude"]
WORKLOADS = (("json", "/json", 1), ("sse-20", "/stream", 2))  # (name, path, divisor of --requests)


def main() -> int:
    os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")  # Jaeger takes traces only; histograms are still kept
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=None, help="requests per variant per repeat (time: 3000, instructions: 200)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (time only)")
    parser.add_argument("--measure", choices=["time", "instructions"], default="time")
    parser.add_argument("--pin", choices=["on", "off"], default="on", help="time: app on core 0, Jaeger and the agent on core 1 (default: on)")
    parser.add_argument("--child", nargs=4, metavar=("VARIANT", "PATH", "N", "ENDPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant_name, path, n, endpoint = args.child
        variant = Variant(variant_name, endpoint)
        variant.open()
        variant.run(path, int(n))
        variant.close()
        return 0
    if args.measure == "instructions" and shutil.which("valgrind") is None:
        print("error: --measure instructions needs valgrind on PATH (apt-get install valgrind)", file=sys.stderr)
        return 2
    args.requests = args.requests or (200 if args.measure == "instructions" else 3000)
    pinned = args.pin == "on" and args.measure == "time" and len(os.sched_getaffinity(0)) >= 2
    with tempfile.TemporaryDirectory() as workdir, jaeger_process(Path(workdir)) as jaeger:
        if pinned:
            pin(os.getpid(), APP_CORE)
            pin(jaeger.pid, EXPORT_CORE)
        args.pinned = pinned
        if args.measure == "instructions":
            print_instructions(count_instructions(jaeger.otlp_http, args.requests), args)
            return 0
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for workload, path, divisor in WORKLOADS:
            for repeat in range(args.repeats):
                order = VARIANTS[repeat % len(VARIANTS) :] + VARIANTS[: repeat % len(VARIANTS)]
                for variant_name in order:
                    variant = Variant(variant_name, jaeger.otlp_http, pinned)
                    variant.open()
                    variant.run(path, 300)  # warm-up: imports, caches, the agent's start
                    result = variant.run(path, args.requests // divisor)
                    results.setdefault((workload, variant_name), []).append(result)
                    variant.close()
                    print(f"{workload} {variant_name} repeat {repeat + 1}: {result}", file=sys.stderr)
        print_table(results, args)
    return 0


def _instructions(variant: str, path: str, n: int, endpoint: str) -> int:
    """Total instructions of one child run under cachegrind (app process only)."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
               sys.executable, "-m", "benchmarks.middleware_overhead", "--child", variant, path, str(n), endpoint]  # fmt: skip
    # Fixed hash seed and no address randomization: the same run counts the same.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    result = subprocess.run(["setarch", "-R", *command], capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1])
    match = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if result.returncode != 0 or match is None:
        raise RuntimeError(f"valgrind run of {variant} {path} failed: {result.stderr.strip()[-500:]}")
    return int(match.group(1).replace(",", ""))


def count_instructions(endpoint: str, requests: int) -> dict[tuple[str, str], float]:
    """Instructions per request: (I(4N) - I(N)) / 3N for every workload and variant."""
    jobs = [(w, v, path, max(1, requests // divisor)) for w, path, divisor in WORKLOADS for v in VARIANTS]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # deterministic counts: parallel runs do not disturb them
        low = {(w, v): pool.submit(_instructions, v, path, n, endpoint) for w, v, path, n in jobs}
        high = {(w, v): pool.submit(_instructions, v, path, 4 * n, endpoint) for w, v, path, n in jobs}
        return {(w, v): (high[(w, v)].result() - low[(w, v)].result()) / (3 * n) for w, v, path, n in jobs}


def print_instructions(per_request: dict[tuple[str, str], float], args: argparse.Namespace) -> None:
    print(f"\ninstructions per request (valgrind cachegrind, app process, export flushed); N = {args.requests}; python {sys.version.split()[0]}\n")
    print("| workload | variant | instructions | added | added / perfkit added | bare + added, as a multiple of bare |")
    print("|---|---|---:|---:|---:|---:|")
    for workload, _, _ in WORKLOADS:
        bare = per_request[(workload, "bare")]
        ours = per_request[(workload, "perfkit-process")] - bare
        for variant in VARIANTS:
            total = per_request[(workload, variant)]
            added = total - bare
            ratio = f"{added / ours:.1f}x" if variant != "bare" else ""
            print(f"| {workload} | {variant} | {total:,.0f} | {added:+,.0f} | {ratio} | {total / bare:.2f}x |")


def print_table(results: dict[tuple[str, str], list[tuple[float, float, float]]], args: argparse.Namespace) -> None:
    print(f"\nrequests per run: {args.requests} (json), {args.requests // 2} (sse-20); repeats: {args.repeats}; medians")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; CPU = process CPU time per request (main + export threads)")
    placement = "app on core 0; Jaeger and the export agent on core 1" if args.pinned else "not pinned"
    print(f"{placement}\n")
    print("| workload | variant | app CPU us | added app CPU us | agent CPU us | added total CPU us | wall us | OTel added / perfkit added (app, total) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for workload in ("json", "sse-20"):
        def med(variant: str, i: int) -> float:
            return statistics.median(r[i] for r in results[(workload, variant)])

        bare = med("bare", 0)
        ours_app = med("perfkit-process", 0) - bare
        ours_total = ours_app + med("perfkit-process", 1)
        for variant in VARIANTS:
            app, agent, wall = med(variant, 0), med(variant, 1), med(variant, 2)
            added = app - bare
            total = added + agent
            ratio = ""
            if variant.startswith("otel"):
                ratio = f"{added / ours_app:.1f}x, {total / ours_total:.1f}x"
            agent_text = f"{agent:.1f}" if variant == "perfkit-process" else ""
            print(f"| {workload} | {variant} | {app:.1f} | {added:+.1f} | {agent_text} | {total:+.1f} | {wall:.1f} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
