"""What recording a request costs the LiteLLM proxy, in one process, finely interleaved.

Whole-proxy comparisons (benchmarks/litellm_overhead.py) differ by 5% between
runs of the same configuration on this machine, which hides changes of a
tenth of a millisecond. This benchmark removes most of that noise: one
instrumented LiteLLM proxy app (``perfkit run``'s bootstrap, ``--exporter
none``) runs in one process, driven through ASGI in-process (a bare ASGI
caller: no sockets, no uvicorn, so no ``protocol`` stage) against the
mock on another core. Each round sends one batch of concurrent requests
with every request recorded, and one with every request passed through
(the middleware's record ratio switched between 1 and 0, in ABBA order),
and charges each batch the process's CPU time until its work after the
response has ended. The marginal cost of recording is the median over
rounds of recorded minus passed-through, per request, with a 95% interval
from order statistics. This is what one recorded request adds to the
proxy's own process; the export agent's share is not in it.

``--against-plain`` asks what the toggle cannot see: what an instrumented
process costs whatever it records. It starts sets of three processes, the
app plain, under perfkit passing every request through, and under perfkit
recording every one, and interleaves their batches (one batch each per
round, in rotating order, all on core 0), so the machine's drift falls on
all three alike. Each set gives the median per-round ratio to plain; sets
differ by what a process draws at start (hash seed, memory layout).

    python -m benchmarks.litellm_recording_cost --version 1.103.0 --rounds 200
    python -m benchmarks.litellm_recording_cost --version 1.103.0 --against-plain --sets 3

``--measure instructions`` counts instead of timing: the passed-through
and the recorded proxy each run under valgrind (callgrind, its
instrumentation switched on only for the ``--rounds`` measured batches,
after ``--warmup``), with a fixed hash seed and no address randomization.
``--runs N`` repeats the pair and prints each run's additions and their
range: runs of one commit differ by several objects and tens of thousands
of instructions a request. It prints the instructions per request of each and their difference, and
where the difference goes: perfkit's C files, CPython's bytecode loop (the
Python code recording runs), the collector, and the largest other
functions; then the Python objects each allocates per request (as
``benchmarks.allocations`` counts them). Deterministic within a few
thousand instructions a request, so it resolves changes that the timed
toggle cannot; it counts the app process only (not the export agent, not
the kernel). ``--cache-sim yes`` also simulates the caches (valgrind's
model of this machine's) and counts the misses recording adds: a level-1
miss costs several instructions' time.
Neither counts the full collections a served proxy's big heap adds
(``litellm_overhead --collector``).

    python -m benchmarks.litellm_recording_cost --version 1.103.0 --measure instructions --rounds 6 --warmup 3 [--cache-sim yes]

``--capture FILE`` records every request of ``--rounds`` batches and writes
their encoded records (as the export agent receives them) to FILE, for
benchmarks/agent_cost.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_INNER = "--inner"
# Cross-process mode: the inner reads "batch" lines on stdin and writes each
# batch's CPU ms per request to this fd (LiteLLM prints to stdout itself).
_RESULTS_FD = "PERFKIT_BENCH_RESULTS_FD"


def interval(values: list[float]) -> tuple[float, float, float]:
    """Median and its 95% interval from order statistics."""
    ordered = sorted(values)
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


async def _started_proxy(args: argparse.Namespace) -> tuple[Any, Callable[[], Awaitable[float]]]:
    """The proxy app after its startup, and a batch runner (CPU ms per request)."""
    import orjson
    from litellm.proxy import proxy_server

    app = proxy_server.app
    startup: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})
    started = asyncio.get_running_loop().create_future()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if not started.done():
            started.set_result(message["type"])

    app.state.perfkit_bench_lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, startup.get, lifespan_send)
    )
    if await started != "lifespan.startup.complete":
        raise SystemExit(f"the proxy did not start: {started.result()}")
    body = orjson.dumps(
        {
            "model": args.model,
            "messages": [{"role": "user", "content": "hi " * 150}],
            "stream": args.workload == "stream",
        }
    )
    # Written out, not benchmarks.middleware_overhead's: the proxy's process runs this file as a
    # script, without the benchmarks package on its path.
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"proxy"),
            (b"authorization", b"Bearer sk-1234"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1234),
        "server": ("proxy", 80),
    }

    async def one() -> None:
        """One request as a server hands it to the app: the body at once, then no disconnect (the
        bare ASGI caller costs the same whether the proxy records or not, where an HTTP client
        would parse the headers a recorded response adds)."""
        delivered = False
        disconnect = asyncio.Event()
        status: list[int] = []
        answer: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                await disconnect.wait()
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif status[0] != 200:
                answer.append(message.get("body", b""))

        await app(dict(scope), receive, send)
        disconnect.set()
        if status != [200]:
            raise SystemExit(f"the proxy answered {status}: {b''.join(answer)[:300]!r}")

    async def batch() -> float:
        before = time.process_time()
        await asyncio.gather(*(one() for _ in range(args.batch)))
        # The work after the response (logging tasks, the hand-off's hold) ends within this.
        await asyncio.sleep(args.settle)
        return (time.process_time() - before) / args.batch * 1e3

    return app, batch


async def _toggled(args: argparse.Namespace) -> None:
    """Recorded against passed through, in this process."""
    from litellm_perfkit._core._sampling import RecordChoice

    app, batch = await _started_proxy(args)
    await batch()
    middleware = _find_middleware(app)
    modes = {"recorded": None, "passed": RecordChoice(0.0, "all")}
    for _ in range(args.warmup):
        for choice in modes.values():
            middleware._record_choice = choice
            await batch()
    results: dict[str, list[float]] = {name: [] for name in modes}
    for round_ in range(args.rounds):
        order = list(modes.items()) if round_ % 2 == 0 else list(modes.items())[::-1]
        for name, choice in order:
            middleware._record_choice = choice
            results[name].append(await batch())
    median, low, high = interval([a - b for a, b in zip(results["recorded"], results["passed"])])
    passed = statistics.median(results["passed"])
    print(
        f"{args.workload}: passed through {passed:.3f} ms CPU per request, recorded {statistics.median(results['recorded']):.3f}; "
        f"recording adds {median * 1e3:.1f} us per request (95% interval {low * 1e3:.1f} to {high * 1e3:.1f}), "
        f"{median / passed * 100:.1f}% of the request"
    )


async def _captured(args: argparse.Namespace) -> None:
    """Every request of ``--rounds`` batches recorded, their encoded records written to ``--capture``."""
    from litellm_perfkit._core import _sink
    from litellm_perfkit._export._frames import batch_frame

    app, batch = await _started_proxy(args)
    for _ in range(args.warmup):
        await batch()
    records: list[bytes] = []
    _sink.set_sink(lambda timeline: records.append(timeline.encode()))
    for _ in range(args.rounds):
        await batch()
    _sink.set_sink(None)
    args.capture.write_bytes(batch_frame(0, 0, records))
    print(
        f"{args.workload}: {len(records)} records, {sum(map(len, records)) / len(records):.0f} bytes each, written to {args.capture}"
    )


async def _served(args: argparse.Namespace) -> None:
    """One batch per "batch" line on stdin, its CPU ms per request written to the results fd."""
    _, batch = await _started_proxy(args)
    loop = asyncio.get_running_loop()
    with open(int(os.environ[_RESULTS_FD]), "w", buffering=1) as results:  # noqa: ASYNC230 - a pipe the parent reads at once
        results.write("ready\n")
        while (await loop.run_in_executor(None, sys.stdin.readline)).strip() == "batch":
            results.write(f"{await batch()}\n")


# (PERFKIT_RECORD_RATIO, PERFKIT_RECORD_RATE) under perfkit; None: plain. "first" records
# one request, the first, then passes every other through; "rate-10" is perfkit run's default.
MODES: dict[str, tuple[str, str] | None] = {
    "plain": None,
    "passed": ("0", "all"),
    "recorded": ("1", "all"),
    "first": ("1", "0.001"),
    "rate-10": ("1", "10"),
}


def _start_server(
    args: argparse.Namespace,
    python: Path,
    env: dict[str, str],
    workload: str,
    mode: str,
    setting: tuple[str, str] | None,
    prefix: tuple[str, ...] = ("taskset", "-c", "0"),
) -> tuple[subprocess.Popen[str], Any]:
    """One proxy of ``mode`` serving (run by ``prefix``: on core 0), once it
    said it is ready: the process, and the pipe it answers each batch on."""
    read, write = os.pipe()
    mode_env = {**env, _RESULTS_FD: str(write)}
    if setting is None:
        for name in ("PERFKIT_RUN", "PYTHONPATH"):
            mode_env.pop(name)
    else:
        mode_env.update(PERFKIT_RECORD_RATIO=setting[0], PERFKIT_RECORD_RATE=setting[1])
    command = [
        *prefix,
        str(python),
        __file__,
        _INNER,
        "--serve",
        "--workload",
        workload,
        "--batch",
        str(args.batch),
        "--settle",
        str(args.settle),
    ]
    child = subprocess.Popen(
        command,
        env=mode_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        pass_fds=(write,),
        cwd=env["PERFKIT_BENCH_WORKDIR"],
    )
    os.close(write)
    results = os.fdopen(read)
    if results.readline().strip() != "ready":
        raise SystemExit(f"the {mode} proxy did not start (run it by hand to see why)")
    return child, results


def _against_plain(args: argparse.Namespace, python: Path, env: dict[str, str], workload: str) -> None:
    modes = {mode: MODES[mode] for mode in ["plain", *args.modes.split(",")]}
    ratios: dict[str, list[float]] = {mode: [] for mode in modes if mode != "plain"}
    for set_ in range(args.sets):
        processes: dict[str, tuple[subprocess.Popen[str], Any]] = {}
        try:
            for mode, setting in modes.items():
                processes[mode] = _start_server(args, python, env, workload, mode, setting)
            names = list(processes)
            per_round: dict[str, list[float]] = {mode: [] for mode in names}
            for round_ in range(args.warmup + args.rounds):
                order = names[round_ % len(names) :] + names[: round_ % len(names)]
                for mode in order:
                    child, results = processes[mode]
                    assert child.stdin is not None
                    child.stdin.write("batch\n")
                    child.stdin.flush()
                    value = float(results.readline())
                    if round_ >= args.warmup:
                        per_round[mode].append(value)
        finally:
            for child, _results in processes.values():
                if child.stdin is not None:
                    child.stdin.close()
                child.wait(timeout=60)
        plain = statistics.median(per_round["plain"])
        line = [f"set {set_ + 1}: plain {plain:.3f} ms CPU per request"]
        for mode in ratios:
            median, low, high = interval([a / b for a, b in zip(per_round[mode], per_round["plain"])])
            ratios[mode].append(median)
            line.append(
                f"{mode} {statistics.median(per_round[mode]):.3f} ({median:.3f}x, 95% interval {low:.3f} to {high:.3f})"
            )
        print(f"{workload}: " + ", ".join(line), flush=True)
    summary = ", ".join(
        f"{mode} {statistics.median(values):.3f}x ({min(values):.3f} to {max(values):.3f})"
        for mode, values in ratios.items()
    )
    print(f"{workload}: median over {args.sets} sets, against plain: {summary}")


# What the instructions table names apart, first match first; every other function is one row.
def _outer(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from litellm_perfkit._bench import CONFIG_TEMPLATE
    from litellm_perfkit._bench._launch import OFFLINE_ENV
    from litellm_perfkit._cli._run import BOOTSTRAP
    from tests.support.litellm_env import litellm_python
    from tests.support.mock_server import mock_process

    python = args.python or litellm_python(args.version)
    os.sched_setaffinity(0, {1})  # the mock here, on core 1; the proxy on core 0
    with tempfile.TemporaryDirectory() as tmp, mock_process("--chunks", "20") as upstream:
        config = Path(tmp) / "config.yaml"
        config.write_text(CONFIG_TEMPLATE.replace("{upstream}", upstream))
        env = {
            **os.environ,
            **OFFLINE_ENV,
            "CONFIG_FILE_PATH": str(config),
            "PERFKIT_RUN": "1",
            "PERFKIT_BENCH_WORKDIR": tmp,
            "PYTHONPATH": os.pathsep.join((str(BOOTSTRAP), str(BOOTSTRAP.parents[2]))),
            "PERFKIT_OTEL_TRACES_EXPORTER": "none",
            "PERFKIT_LEAVE_OUT": args.leave_out,
            "PERFKIT_RECORD_RATE": "all",
        }
        print(
            f"LiteLLM {args.version}, in-process (ASGI), "
            + ("under valgrind" if args.measure == "instructions" else "core 0")
            + f"; batches of {args.batch} concurrent requests, "
            f"{args.rounds} rounds after {args.warmup} warm-up rounds"
            + (f"; left out: {args.leave_out}" if args.leave_out else "")
        )
        for workload in args.workloads.split(","):
            if args.measure == "instructions":
                from benchmarks._callgrind import count_instructions, runs_spread

                def start(env: dict[str, str], mode: str, prefix: tuple[str, ...], workload: str = workload) -> Any:
                    return _start_server(args, python, env, workload, mode, MODES[mode], prefix)

                runs = [count_instructions(args, python, env, workload, start) for _ in range(args.runs)]
                if args.runs > 1:
                    runs_spread(workload, runs)
                continue
            if args.against_plain:
                _against_plain(args, python, env, workload)
                continue
            command = ["taskset", "-c", "0", str(python), __file__, _INNER, "--workload", workload]
            if args.capture:
                command += ["--capture", str(args.capture.resolve().with_suffix(f".{workload}{args.capture.suffix}"))]
            for name in ("rounds", "batch", "warmup", "settle"):
                command += [f"--{name}", str(getattr(args, name))]
            subprocess.run(command, env=env, check=True, cwd=tmp)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(_INNER, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--version", default="1.103.0")
    parser.add_argument("--workloads", default="json", help="json, stream or both (comma-separated)")
    parser.add_argument("--workload", default="json", help=argparse.SUPPRESS)
    parser.add_argument(
        "--measure",
        choices=("time", "instructions"),
        default="time",
        help="time: CPU, recorded against passed through in one process; instructions: each under valgrind",
    )
    parser.add_argument(
        "--cache-sim",
        choices=("no", "yes"),
        default="no",
        help="with --measure instructions: also simulate the caches and count their misses (about twice as slow)",
    )
    parser.add_argument(
        "--allocation-callers",
        type=int,
        default=0,
        metavar="DEPTH",
        help="with --measure instructions: also list the 30 call chains (DEPTH callers deep) "
        "whose objects recording adds most (callgrind's --separate-callers)",
    )
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16, help="concurrent requests per batch")
    parser.add_argument("--warmup", type=int, default=20, help="rounds not counted")
    parser.add_argument(
        "--settle",
        type=float,
        help="seconds each batch waits for its work after the response (default 0.02; 1 with --measure instructions)",
    )
    parser.add_argument(
        "--against-plain",
        action="store_true",
        help="interleave processes: plain, perfkit passing through, perfkit recording",
    )
    parser.add_argument(
        "--sets", type=int, default=3, help="with --against-plain: sets of processes, one after the other"
    )
    parser.add_argument(
        "--modes",
        default="passed,recorded",
        help="with --against-plain: beside plain, from " + ", ".join(m for m in MODES if m != "plain"),
    )
    parser.add_argument(
        "--python",
        type=Path,
        help="the proxy's interpreter (default: --version's cached venv, built if missing); "
        "this checkout's perfkit runs in it either way",
    )
    parser.add_argument("--leave-out", default="", help="PERFKIT_LEAVE_OUT for the proxy (docs/configuration.md)")
    parser.add_argument(
        "--capture",
        type=Path,
        help="write the encoded records of --rounds recorded batches to this file (one per workload: "
        "FILE.json.EXT, FILE.stream.EXT), for benchmarks/agent_cost.py",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="with --measure instructions: run the pair of processes this many times and print each run's "
        "additions and their range (one commit's runs differ by several objects a request)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="with --measure instructions: copy the callgrind outputs (callgrind.WORKLOAD.MODE) to DIR, "
        "for callgrind_annotate or kcachegrind",
    )
    parser.add_argument("--model", default="fake-openai-endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.settle is None:
        args.settle = 1.0 if args.measure == "instructions" else 0.02
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: run at least once")
    if args.measure == "instructions" and not args.inner:
        if args.against_plain or args.capture:
            parser.error(
                "--measure instructions compares recorded with passed through: not with --against-plain or --capture"
            )
        missing = [
            tool
            for tool in ("valgrind", "callgrind_control", "callgrind_annotate", "setarch")
            if not shutil.which(tool)
        ]
        if missing:
            parser.error(
                f"--measure instructions needs {', '.join(missing)} on PATH (apt-get install valgrind util-linux)"
            )
    if args.inner:
        import uvloop

        uvloop.run(_served(args) if args.serve else _captured(args) if args.capture else _toggled(args))
        return 0
    return _outer(args)


if __name__ == "__main__":
    sys.exit(main())
