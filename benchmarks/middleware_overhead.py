"""What PerfkitMiddleware adds per request, against bare and OpenTelemetry ASGI.

One process drives the same trivial Starlette app through ASGI directly (no
sockets, so only middleware and export cost differ): a JSON response and a
20-chunk SSE stream, the app marking 4 stages. Every request's spans are
exported over OTLP/HTTP (protobuf) to a local Jaeger.

**Time** (the default). This machine's speed drifts by 10-30% over seconds,
so variants are interleaved finely: a round runs one batch of ``--batch``
requests of every variant, in turn, in one event loop, and each batch is
charged the main thread's CPU time. A variant's added cost is the median,
over ``--rounds`` rounds, of its batch minus bare's batch of the same round
(with a 95% interval from order statistics), plus the CPU its export thread
used over the whole run (per-thread CPU clock), per request. perfkit's
``process`` mode exports from a child agent whose CPU is a column of its
own, never hidden; OTel ASGI exports from a thread, counted in its app cost.
With two or more cores (``--pin on``) the app runs on core 0 and Jaeger and
the agent on core 1.

- ``perfkit-noexport``: the middleware with no exporter, the request path
  alone; the difference to ``perfkit-process`` is what export costs the app.
- ``perfkit-noexport-nosteps``: the same with step accounting off
  (``steps="off"``); the difference is what the CPU/queueing/I/O split costs.
- ``passthrough-untallied``, ``passthrough-tallied`` (and ``-py``): a request
  the record rate or ratio passes by (record ratio 0). ``untallied`` is that
  path as it was before the traffic tally (the record choice, then the app
  with the server's own ``send``; reproduced here by ``UntalliedPassThrough``);
  ``tallied`` is today's ``PerfkitMiddleware`` (the app gets a ``Passage``'s
  bound ``send`` as its ``send``, and the request is added to the tally), its header scan
  included (the secret's removal, a sampled ``traceparent``; the requests
  carry ``--headers`` headers, default 2). ``passthrough-wrapped`` is
  untallied with the server's ``send`` behind one plain Python function
  that only calls it: the least any watch on each message costs the app
  (``WrappedPassThrough``). Their own table gives
  the medians, the ratios to bare, and the tally's cost: tallied minus
  untallied, round by round.
- ``-py`` variants: perfkit's pure-Python path, which runs when the C
  accelerator is not built (no compiler) or ``PERFKIT_SPEEDUPS=off``.
- ``--host-provider on``: the process sets an OpenTelemetry SDK tracer
  provider, as a host that traces does: every perfkit variant then joins
  its trace (the request span and each stage made current). ``perfkit-sdk``
  (only then) hands perfkit's spans to that provider's span processors
  instead of perfkit's own OTLP path.

**Instructions** (``--measure instructions``): each variant runs under
valgrind (cachegrind) twice, with N and 4N requests; the difference of the
totals divided by 3N is the instructions per request, start-up cancelled
out. Deterministic, so it resolves what timings here cannot; it counts the
app process only (not the agent) and not the kernel.

    python -m benchmarks.middleware_overhead [--rounds 200] [--batch 50] [--pin on|off] [--host-provider on]
    python -m benchmarks.middleware_overhead --measure instructions [--requests 200]

``--variants`` picks a subset for either measure; by default every variant
runs, but ``perfkit-sdk`` only with ``--host-provider on`` (and never under
``--measure instructions``, whose child processes set no provider).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from litellm_perfkit import PerfkitMiddleware, stage
from litellm_perfkit._core import _sink
from litellm_perfkit._core._backend import ACTIVE
from litellm_perfkit._core._sampling import RecordChoice
from litellm_perfkit._export import Pipeline, read_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._pinning import pin  # noqa: E402
from tests.support import backends  # noqa: E402
from tests.support.servers import jaeger_process  # noqa: E402

CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
VARIANTS = [
    "bare",
    "perfkit-process",
    "perfkit-thread",
    "perfkit-noexport",
    "perfkit-noexport-nosteps",
    "perfkit-process-py",
    "perfkit-noexport-py",
    "passthrough-untallied",
    "passthrough-wrapped",
    "passthrough-tallied",
    "passthrough-tallied-py",
    "perfkit-sdk",
    "otel-asgi",
    "otel-asgi-exclude",
]
WORKLOADS = (("json", "/json"), ("sse-20", "/stream"))
APP_CORE, EXPORT_CORE = {0}, {1}


PYTHON = backends.load("python")  # the pure-Python request path, for the -py variants


def make_app(stage_class: Callable[[str], Any] = stage, stages: bool = True) -> Starlette:
    def four_stages(last: str) -> None:
        if not stages:
            return
        for name in ("auth", "pre_call", "upstream", last):
            with stage_class(name):
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

    return Starlette(routes=[Route("/json", json_endpoint), Route("/stream", stream_endpoint)])


# A request's headers: --headers of them (a LiteLLM client sends 8-12).
HEADERS = [(b"host", b"bench"), (b"user-agent", b"bench")]
MORE_HEADERS = [
    (b"content-type", b"application/json"),
    (b"accept", b"application/json"),
    (b"authorization", b"Bearer sk-1234"),
    (b"content-length", b"120"),
    (b"accept-encoding", b"gzip, deflate"),
    (b"connection", b"keep-alive"),
    (b"x-stainless-lang", b"python"),
    (b"x-stainless-os", b"Linux"),
    (b"x-stainless-arch", b"x64"),
    (b"x-stainless-runtime", b"CPython"),
]


async def drive(app: Any, path: str, n: int) -> None:
    headers = HEADERS

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


class UntalliedPassThrough:
    """PerfkitMiddleware's unrecorded path before the traffic tally: the
    record choice, then the app with the server's own send, nothing counted
    but the number passed through."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._record_choice = RecordChoice(0.0, "all")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (self._record_choice is not None and not self._record_choice.record()):
            await self.app(scope, receive, send)
            return
        raise AssertionError("record ratio 0 records nothing")


class WrappedPassThrough(UntalliedPassThrough):
    """The untallied pass-through with the server's send behind one Python
    function that only calls it: a floor for any send that sees each message."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        def watched(message: dict[str, Any]) -> Any:
            return send(message)

        await super().__call__(scope, receive, watched)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_ns(thread: threading.Thread) -> int:
    assert thread.ident is not None
    return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))


@dataclass
class Variant:
    """One way of serving the app; ``use()`` makes it the one that runs."""

    name: str
    app: Any
    sink: Callable[[Any], None] | None = None
    flush: Callable[[], None] = lambda: None
    close: Callable[[], None] = lambda: None
    threads: list[threading.Thread] = field(default_factory=list)
    pipeline: Any = None  # perfkit's, whose export agent starts with its first drain

    @property
    def agent_pid(self) -> int | None:
        agent = getattr(self.pipeline, "_agent", None)
        return agent.process.pid if agent else None

    def use(self) -> None:
        _sink.set_sink(self.sink)  # the core's sink is global: set per batch


def open_variant(name: str, endpoint: str, pinned: bool) -> Variant:
    python_path = name.endswith("-py")
    app = make_app(PYTHON.stage if python_path else stage)
    middleware = PYTHON.middleware if python_path else PerfkitMiddleware
    started = set(threading.enumerate())
    if name == "bare":
        variant = Variant(name, app)
    elif name == "passthrough-untallied":
        variant = Variant(name, UntalliedPassThrough(app))
    elif name == "passthrough-wrapped":
        variant = Variant(name, WrappedPassThrough(app))
    elif name.startswith("passthrough-tallied"):
        variant = Variant(name, middleware(app, record_ratio=0.0))
    elif name.startswith("perfkit-noexport"):
        # The request path alone: timelines go nowhere, so export costs nothing.
        variant = Variant(name, middleware(app, steps="off" if name.endswith("-nosteps") else "on"))
    elif name.startswith("perfkit"):
        # perfkit-sdk: spans handed to the host's SDK tracer provider (--host-provider on), built in a thread.
        exporter = "sdk" if name == "perfkit-sdk" else "otlp"
        settings = read_settings(
            service_name=f"bench-{name}", exporter=exporter, protocol="http/protobuf", endpoint=endpoint
        )
        mode = "process" if "process" in name else "thread"
        pipeline = Pipeline(settings, mode=mode, backend=PYTHON if python_path else ACTIVE).start()
        variant = Variant(
            name, middleware(app), pipeline.sink, pipeline.force_flush, pipeline.shutdown, pipeline=pipeline
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": f"bench-{name}"}))
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), max_queue_size=100_000)
        )
        exclude = ["receive", "send"] if "exclude" in name else None
        otel = OpenTelemetryMiddleware(app, tracer_provider=provider, exclude_spans=exclude)
        variant = Variant(name, otel, flush=lambda: provider.force_flush(60_000), close=provider.shutdown)
    variant.threads = [thread for thread in threading.enumerate() if thread not in started]
    return variant


@dataclass
class Measured:
    main_us: list[float]  # per round, main-thread CPU per request
    export_us: float  # the variant's own threads and its final flush, per request, whole run
    agent_us: float


async def interleave(
    variants: list[Variant], path: str, rounds: int, batch: int, warmed: Callable[[], None] = lambda: None
) -> dict[str, list[float]]:
    """Main-thread CPU µs per request of each variant, one value per round."""
    main: dict[str, list[float]] = {v.name: [] for v in variants}
    for number in range(rounds + 2):  # two rounds of warm-up
        if number == 2:
            warmed()
        for variant in variants[number % len(variants) :] + variants[: number % len(variants)]:
            variant.use()
            started = time.thread_time_ns()
            await drive(variant.app, path, batch)
            if number >= 2:
                main[variant.name].append((time.thread_time_ns() - started) / batch / 1000)
    return main


def measure_time(
    endpoint: str, path: str, names: list[str], rounds: int, batch: int, pinned: bool
) -> dict[str, Measured]:
    variants = [open_variant(name, endpoint, pinned) for name in names]
    try:
        threads_before = {v.name: sum(thread_cpu_ns(t) for t in v.threads) for v in variants}
        agents_before: dict[str, float] = {}

        def warmed() -> None:
            for v in variants:
                v.flush()  # the warm-up's export, which starts the agent
                if v.agent_pid:
                    if pinned:
                        pin(v.agent_pid, EXPORT_CORE)  # it inherited the app's core
                    agents_before[v.name] = cpu_seconds(v.agent_pid)

        main = asyncio.run(interleave(variants, path, rounds, batch, warmed))
        requests = (rounds + 2) * batch
        results = {}
        for v in variants:
            # Everything exported, inside the measurement; the flush drains the
            # queue on this thread, which is export work too.
            flush_started = time.thread_time_ns()
            v.flush()
            flushed_ns = time.thread_time_ns() - flush_started
            threads_ns = sum(thread_cpu_ns(t) for t in v.threads) - threads_before[v.name]
            export = (threads_ns + flushed_ns) / requests / 1000
            agent_pid = v.agent_pid if v.name in agents_before else None  # up since the warm-up: its start-up left out
            agent = (cpu_seconds(agent_pid) - agents_before[v.name]) / (rounds * batch) * 1e6 if agent_pid else 0.0
            results[v.name] = Measured(main[v.name], export, agent)
        return results
    finally:
        _sink.set_sink(None)
        for v in variants:
            v.close()


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """Median and a distribution-free 95% interval (order statistics)."""
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * math.sqrt(n) / 2
    low, high = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half))
    return statistics.median(ordered), ordered[low], ordered[high]


def print_table(results: dict[str, dict[str, Measured]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.rounds} rounds x {args.batch} requests per variant, interleaved by batch; python {sys.version.split()[0]}, {os.cpu_count()} cores"
    )
    print(
        "app: main-thread CPU per request (median over rounds) plus the variant's export thread; "
        + ("app on core 0, Jaeger and the export agent on core 1" if args.pinned else "not pinned")
    )
    print(
        "\n| workload | variant | main-thread CPU µs | added main-thread µs [95% CI] | export thread µs | added app µs | agent CPU µs | added total µs | OTel / perfkit (app, total) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for workload, by_variant in results.items():
        bare = by_variant["bare"].main_us
        added = {}
        for name, m in by_variant.items():
            diff = median_interval([a - b for a, b in zip(m.main_us, bare)])
            app = diff[0] + m.export_us
            added[name] = (diff, app, app + m.agent_us)
        ours = added.get("perfkit-process")
        for name, m in by_variant.items():
            (mid, low, high), app, total = added[name]
            ratio = f"{app / ours[1]:.1f}x, {total / ours[2]:.1f}x" if name.startswith("otel") and ours else ""
            agent = f"{m.agent_us:.1f}" if m.agent_us else ""
            print(
                f"| {workload} | {name} | {statistics.median(m.main_us):.1f} | {mid:+.1f} [{low:+.1f}, {high:+.1f}] | "
                f"{m.export_us:.1f} | {app:+.1f} | {agent} | {total:+.1f} | {ratio} |"
            )


def print_passthrough(results: dict[str, dict[str, Measured]]) -> None:
    """The unrecorded path: bare, before the tally, with it (budget: the tally adds at most 2 µs)."""
    names = [
        n
        for n in ("passthrough-untallied", "passthrough-wrapped", "passthrough-tallied", "passthrough-tallied-py")
        if n in next(iter(results.values()))
    ]
    if "passthrough-untallied" not in names:
        return
    print("\nunrecorded requests (record ratio 0): main-thread CPU µs per request, medians over rounds")
    print("\n| workload | variant | µs | / bare | added to untallied µs [95% CI] |")
    print("|---|---|---:|---:|---:|")
    for workload, by_variant in results.items():
        bare = statistics.median(by_variant["bare"].main_us)
        untallied = by_variant["passthrough-untallied"].main_us
        print(f"| {workload} | bare | {bare:.2f} | 1.00x | |")
        for name in names:
            m = by_variant[name]
            mid, low, high = median_interval([a - b for a, b in zip(m.main_us, untallied)])
            added = "" if name == "passthrough-untallied" else f"{mid:+.2f} [{low:+.2f}, {high:+.2f}]"
            print(
                f"| {workload} | {name} | {statistics.median(m.main_us):.2f} | {statistics.median(m.main_us) / bare:.2f}x | {added} |"
            )


# -- instructions -----------------------------------------------------------------


def run_child(name: str, path: str, n: int, endpoint: str) -> None:
    variant = open_variant(name, endpoint, pinned=False)
    variant.use()
    asyncio.run(drive(variant.app, path, n))
    variant.flush()
    variant.close()


def counted_child(tool: list[str], variant: str, path: str, n: int, endpoint: str) -> subprocess.CompletedProcess[str]:
    """One variant's N requests in a child run under a valgrind ``tool`` (the command and its options).
    Fixed hash seed and no address randomization: the same run counts the same."""
    child = [sys.executable, "-m", "benchmarks.middleware_overhead", "--headers", str(len(HEADERS)), "--child"]
    command = ["setarch", "-R", "valgrind", *tool, *child, variant, path, str(n), endpoint]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1])


def _instructions(variant: str, path: str, n: int, endpoint: str) -> int:
    """Total instructions of one child run under cachegrind (app process only)."""
    tool = ["--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    result = counted_child(tool, variant, path, n, endpoint)
    match = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if result.returncode != 0 or match is None:
        raise RuntimeError(f"valgrind run of {variant} {path} failed: {result.stderr.strip()[-500:]}")
    return int(match.group(1).replace(",", ""))


def count_instructions(endpoint: str, requests: int, names: list[str]) -> dict[tuple[str, str], float]:
    """Instructions per request: (I(4N) - I(N)) / 3N for every workload and variant."""
    jobs = [(w, v, path, max(1, requests // (2 if w == "sse-20" else 1))) for w, path in WORKLOADS for v in names]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # deterministic counts: parallel runs do not disturb them
        low = {(w, v): pool.submit(_instructions, v, path, n, endpoint) for w, v, path, n in jobs}
        high = {(w, v): pool.submit(_instructions, v, path, 4 * n, endpoint) for w, v, path, n in jobs}
        return {(w, v): (high[(w, v)].result() - low[(w, v)].result()) / (3 * n) for w, v, path, n in jobs}


def print_instructions(per_request: dict[tuple[str, str], float], names: list[str], args: argparse.Namespace) -> None:
    print(
        f"\ninstructions per request (valgrind cachegrind, app process, export flushed); N = {args.requests}; python {sys.version.split()[0]}\n"
    )
    print("| workload | variant | instructions | added | added / perfkit added | bare + added, as a multiple of bare |")
    print("|---|---|---:|---:|---:|---:|")
    for workload, _ in WORKLOADS:
        bare = per_request[(workload, "bare")]
        process = per_request.get((workload, "perfkit-process"))
        ours = None if process is None else process - bare
        for variant in names:
            total = per_request[(workload, variant)]
            added = total - bare
            ratio = f"{added / ours:.1f}x" if variant != "bare" and ours else ""
            print(f"| {workload} | {variant} | {total:,.0f} | {added:+,.0f} | {ratio} | {total / bare:.2f}x |")


def set_host_provider(endpoint: str) -> Any:
    """A host that traces: the OpenTelemetry SDK's provider, batching to Jaeger."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "bench-host"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), max_queue_size=100_000)
    )
    trace.set_tracer_provider(provider)
    return provider


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", choices=["time", "instructions"], default="time")
    parser.add_argument("--rounds", type=int, default=200, help="time: rounds of one batch per variant (default 200)")
    parser.add_argument("--batch", type=int, default=50, help="time: requests per batch (default 50)")
    parser.add_argument("--requests", type=int, default=200, help="instructions: N (default 200; streams N/2)")
    parser.add_argument(
        "--variants",
        default="",
        help="a comma-separated subset (bare is always run; default: every variant, perfkit-sdk only with "
        "--host-provider on)",
    )
    parser.add_argument(
        "--pin",
        choices=["on", "off"],
        default="on",
        help="time: app on core 0, Jaeger and the agent on core 1 (default: on)",
    )
    parser.add_argument(
        "--host-provider",
        choices=["on", "off"],
        default="off",
        help="time: the process sets an OpenTelemetry SDK tracer provider (a host that traces, exporting to the "
        "same Jaeger), so perfkit joins its trace on every request; needed by perfkit-sdk",
    )
    parser.add_argument(
        "--headers",
        type=int,
        default=2,
        choices=range(2, 2 + len(MORE_HEADERS) + 1),
        metavar=f"2..{2 + len(MORE_HEADERS)}",
        help="headers per request (default 2: host, user-agent; more are a LiteLLM client's)",
    )
    parser.add_argument(
        "--child",
        nargs=4,
        metavar=("VARIANT", "PATH", "N", "ENDPOINT"),
        help="run one variant's N requests to PATH (/json or /stream) in this process, as --measure instructions "
        "does under valgrind (for a profiler of your own, e.g. callgrind); ENDPOINT: the OTLP endpoint",
    )
    return parser


def _variants(args: argparse.Namespace) -> list[str]:
    """The variants to run, bare first; ValueError says what is wrong with the choice."""
    chosen = (
        args.variants.split(",")
        if args.variants
        else [
            name
            for name in VARIANTS
            if name != "perfkit-sdk" or (args.host_provider == "on" and args.measure == "time")
        ]
    )
    names = ["bare"] + [name for name in chosen if name and name != "bare"]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.measure == "instructions" and shutil.which("valgrind") is None:
        raise ValueError("--measure instructions needs valgrind on PATH (apt-get install valgrind)")
    if "perfkit-sdk" in names and args.measure == "instructions":
        raise ValueError("perfkit-sdk is measured by time only (the counted child sets no tracer provider)")
    if "perfkit-sdk" in names and args.host_provider == "off":
        raise ValueError("perfkit-sdk hands spans to the host's tracer provider: add --host-provider on")
    return names


def main() -> int:
    os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")  # Jaeger takes traces only; histograms are still kept
    args = _parser().parse_args()
    HEADERS[2:] = MORE_HEADERS[: args.headers - 2]
    if args.child:
        name, path, n, endpoint = args.child
        run_child(name, path, int(n), endpoint)
        return 0
    try:
        names = _variants(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.pinned = args.pin == "on" and args.measure == "time" and len(os.sched_getaffinity(0)) >= 2
    with tempfile.TemporaryDirectory() as workdir, jaeger_process(Path(workdir)) as jaeger:
        if args.pinned:
            pin(os.getpid(), APP_CORE)
            pin(jaeger.pid, EXPORT_CORE)
        host = set_host_provider(jaeger.otlp_http) if args.host_provider == "on" else None
        try:
            if args.measure == "instructions":
                print_instructions(count_instructions(jaeger.otlp_http, args.requests, names), names, args)
                return 0
            results = {}
            for workload, path in WORKLOADS:
                print(f"{workload}: {len(names)} variants x {args.rounds} rounds ...", file=sys.stderr)
                results[workload] = measure_time(jaeger.otlp_http, path, names, args.rounds, args.batch, args.pinned)
            print_table(results, args)
            print_passthrough(results)
        finally:
            if host is not None:
                host.shutdown()  # its last spans exported while Jaeger still runs
    return 0


if __name__ == "__main__":
    sys.exit(main())
