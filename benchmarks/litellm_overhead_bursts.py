"""What perfkit costs the real LiteLLM proxy, with the machine's drift taken out: short bursts rotated among live proxies.

benchmarks/litellm_overhead.py runs one proxy at a time, 10-15 s each, and
its ratios move by about 5% between runs of one configuration: the machine's
speed drifts over seconds to minutes. Here one proxy per mode runs at once,
all pinned to core 0 with their export agents, each over its own socket. A
round sends each proxy one burst of load (``--burst`` seconds, 32 users, in
rotating order), so drift falls on every mode alike, and reads each one's
CPU (worker, and agent apart) from /proc around its burst. A set's figure for
a mode is the median over rounds of its CPU per request divided by plain's
in the same round. Sets (``--sets``) start fresh processes: a process's own
draw at start (hash seed, memory layout) differs between sets, not within.

``--collector`` loads the collector probe (benchmarks/_gcprobe) into every
proxy and adds, per mode and set, the objects promoted into the oldest
generation per request, the full collections per 1000 requests and their
pause per request: what a mode's objects that outlive young collections cost
the host's collector.

    python -m benchmarks.litellm_overhead_bursts --version 1.103.0 --modes plain,perfkit-record-0,perfkit-record-0.1,perfkit
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.litellm_overhead import GC_PROBE, children, collector_counts, mode_settings  # noqa: E402
from benchmarks.litellm_recording_cost import interval  # noqa: E402
from benchmarks.middleware_overhead import cpu_seconds  # noqa: E402
from litellm_perfkit._load import LoadPlan, Workload, run_load  # noqa: E402
from tests.support.litellm_env import VERSIONS  # noqa: E402
from tests.support.mock_server import mock_process  # noqa: E402
from tests.support.proxy import litellm_proxy  # noqa: E402
from tests.support.servers import jaeger_process  # noqa: E402


class Burst(NamedTuple):
    rps: float
    worker_ms: float  # worker CPU per request
    agent_ms: float  # export agent CPU per request
    requests: int
    start_ns: int  # the monotonic clock, as the collector probe logs it
    end_ns: int


def burst(url: str, stream: bool, seconds: float, concurrency: int, pid: int) -> Burst:
    """One burst of load, and what the proxy spent on it."""
    started = time.monotonic_ns()
    agents = children(pid)
    before = cpu_seconds(pid), sum(map(cpu_seconds, agents))
    summary = run_load(Workload(url=url, stream=stream, prompt_repeats=150),
                       LoadPlan(concurrency=concurrency, duration_s=seconds, warmup_s=0, timeout_s=60), progress="off")["summary"]  # fmt: skip
    if summary["errors"]:
        raise RuntimeError(f"errors: {summary['errors_by_class']}")
    # Work after the last response (logging tasks, the agent's export) is charged to this burst.
    requests = max(1, summary["requests"])
    after = cpu_seconds(pid), sum(map(cpu_seconds, agents))
    return Burst(summary["rps"], (after[0] - before[0]) / requests * 1e3, (after[1] - before[1]) / requests * 1e3, requests, started,
                 time.monotonic_ns())  # fmt: skip


def collector_line(mode: str, bursts: list[Burst], log: Path) -> str:
    """The collector's work in ``mode``'s bursts, per request."""
    counts = [collector_counts(log, b.start_ns, b.end_ns) for b in bursts]
    requests = sum(b.requests for b in bursts)
    promoted, full, full_s = (sum(c[key] for c in counts) for key in ("promoted", "full", "full_s"))
    return (f"{mode}: {promoted / requests:.0f} objects promoted per request, {full / requests * 1e3:.2f} full collections "
            f"per 1000 requests, their pause {full_s / requests * 1e3:.3f} ms per request")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=VERSIONS[-1], choices=VERSIONS)
    parser.add_argument("--modes", default="plain,perfkit", help="comma-separated, as benchmarks/litellm_overhead.py names them; the first is the baseline")
    parser.add_argument("--workload", default="json", choices=("json", "stream"))
    parser.add_argument("--sets", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="rounds not counted")
    parser.add_argument("--burst", type=float, default=3.0, help="seconds of load per proxy per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--collector", action="store_true", help="load the collector probe into every proxy: promotions and full collections per request")
    args = parser.parse_args()
    modes = args.modes.split(",")
    os.sched_setaffinity(0, {1})  # the driver, the mock and Jaeger on core 1; the proxies on core 0
    per_set: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in modes[1:]}
    collector: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, jaeger_process(Path(tmp)) as jaeger, mock_process("--chunks", "20") as upstream:
        exporter = ("--endpoint", jaeger.otlp_http, "--protocol", "http/protobuf", "--service-name", "bench-litellm")
        for set_ in range(args.sets):
            with contextlib.ExitStack() as stack:
                proxies: dict[str, tuple[str, int]] = {}
                for mode in modes:
                    proxy_mode, env, perfkit_args = mode_settings(mode, exporter)
                    pids: list[int] = []
                    workdir = Path(tmp) / f"{set_}-{mode}"
                    workdir.mkdir()
                    if args.collector:
                        env = {"PYTHONPATH": str(GC_PROBE), "PERFKIT_BENCH_GC_LOG": str(workdir / "gc"), "PERFKIT_BENCH_GC_PROMOTED": "1", **env}
                    url = stack.enter_context(litellm_proxy(args.version, upstream, workdir, mode=proxy_mode, perfkit_args=perfkit_args, pin_cpu="0",
                                                            env=env, pids=pids))  # fmt: skip
                    proxies[mode] = (url, pids[0])
                rows: dict[str, list[Burst]] = {mode: [] for mode in modes}
                for round_ in range(args.warmup + args.rounds):
                    order = modes[round_ % len(modes) :] + modes[: round_ % len(modes)]
                    for mode in order:
                        url, pid = proxies[mode]
                        result = burst(url, args.workload == "stream", args.burst, args.concurrency, pid)
                        if round_ >= args.warmup:
                            rows[mode].append(result)
            base = rows[modes[0]]
            line = [f"{modes[0]} {statistics.median(r.rps for r in base):.1f} req/s, {statistics.median(r.worker_ms for r in base):.3f} ms worker CPU"]
            for mode in modes[1:]:
                cpu = interval([(r.worker_ms + r.agent_ms) / b.worker_ms for r, b in zip(rows[mode], base)])
                rps = interval([r.rps / b.rps for r, b in zip(rows[mode], base)])
                agent = statistics.median(r.agent_ms for r in rows[mode])
                per_set[mode].append((cpu[0], rps[0], agent))
                line.append(f"{mode}: CPU {cpu[0]:.3f}x ({cpu[1]:.3f} to {cpu[2]:.3f}, agent {agent:.3f} ms included), RPS {rps[0]:.3f}x ({rps[1]:.3f} to {rps[2]:.3f})")
            print(f"set {set_ + 1}: " + "; ".join(line), flush=True)
            if args.collector:
                collector += [f"set {set_ + 1}: " + collector_line(mode, rows[mode], Path(tmp) / f"{set_}-{mode}" / "gc") for mode in modes]
                print("\n".join(collector[-len(modes):]), flush=True)
    print(f"\nLiteLLM {args.version}, {args.workload}, {len(modes)} proxies on core 0 (with their agents), {args.rounds} rounds of {args.burst:g} s bursts "
          f"after {args.warmup} warm-up rounds, {args.concurrency} users; per set: the median per-round ratio to {modes[0]}\n")  # fmt: skip
    print(f"| mode | CPU per request / {modes[0]} (agent included), per set | RPS / {modes[0]}, per set | agent ms per request |")
    print("|---|---|---|---:|")
    for mode, values in per_set.items():
        print(f"| {mode} | {' '.join(f'{v[0]:.3f}' for v in values)} | {' '.join(f'{v[1]:.3f}' for v in values)} | {statistics.median(v[2] for v in values):.3f} |")
    if collector:
        print("\nThe collector (benchmarks/_gcprobe), per set:\n" + "\n".join(collector))
    return 0


if __name__ == "__main__":
    sys.exit(main())
