"""What perfkit costs the real LiteLLM proxy: interleaved runs with and without it.

The proxy (1 worker) runs pinned to core 0; under ``perfkit run`` its export
agent inherits the pin, so the agent's CPU is charged to perfkit here. The
mock provider, the load driver and Jaeger share core 1: a tracing backend is
not perfkit's cost, and unpinned, Jaeger's ingest (about 100 µs of CPU per
traced request here) ran on the proxy's core too. Every span is exported
over OTLP/HTTP (protobuf) to that Jaeger. Plain and instrumented runs alternate
``--repeats`` times; the table shows medians and ratios.

    python -m benchmarks.litellm_overhead [--version 1.103.0] [--repeats 5] [--duration 15]

Target: instrumented RPS >= 97% of plain.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from litellm_perfkit._load import LoadPlan, Workload, run_load  # noqa: E402
from tests.support.litellm_env import VERSIONS  # noqa: E402
from tests.support.mock_server import mock_process  # noqa: E402
from tests.support.proxy import litellm_proxy  # noqa: E402
from tests.support.servers import jaeger_process  # noqa: E402


def measure(url: str, stream: bool, duration: float, concurrency: int) -> dict[str, float]:
    workload = Workload(url=url, stream=stream, prompt_repeats=150)
    plan = LoadPlan(concurrency=concurrency, duration_s=duration, warmup_s=5.0, timeout_s=60)
    summary = run_load(workload, plan, progress="off")["summary"]
    if summary["errors"]:
        raise RuntimeError(f"errors: {summary['errors_by_class']}")
    return {"rps": summary["rps"], "p50": summary["latency_ms"]["p50"], "p95": summary["latency_ms"]["p95"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=VERSIONS[-1], choices=VERSIONS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    # The driver (this process) and what it starts, Jaeger and the mock, on
    # core 1; the proxy is started with taskset on core 0.
    os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory() as tmp, jaeger_process(Path(tmp)) as jaeger, mock_process("--chunks", "20") as upstream:
        exporter = ("--endpoint", jaeger.otlp_http, "--protocol", "http/protobuf", "--service-name", "bench-litellm")
        for repeat in range(args.repeats):
            order = ["plain", "perfkit"] if repeat % 2 == 0 else ["perfkit", "plain"]
            for mode in order:
                with litellm_proxy(args.version, upstream, Path(tmp), mode=mode, perfkit_args=exporter, pin_cpu="0") as url:  # type: ignore[arg-type]
                    for workload in ("json", "stream"):
                        result = measure(url, workload == "stream", args.duration, args.concurrency)
                        results.setdefault((workload, mode), []).append(result)
                        print(f"repeat {repeat + 1} {mode} {workload}: {result}", file=sys.stderr)
        spans = sum(len(t["spans"]) for t in jaeger.traces("bench-litellm"))
    print(f"\nLiteLLM {args.version}, 1 worker on core 0 (with perfkit's agent), mock + driver + Jaeger on core 1; "
          f"{args.repeats} interleaved repeats x {args.duration:g} s, {args.concurrency} users; medians")  # fmt: skip
    print(f"spans stored in Jaeger (last 1000 traces shown by its API): {spans}\n")
    print("| workload | metric | plain | perfkit | perfkit / plain |")
    print("|---|---|---:|---:|---:|")
    for workload in ("json", "stream"):
        for metric in ("rps", "p50", "p95"):
            plain = statistics.median(r[metric] for r in results[(workload, "plain")])
            ours = statistics.median(r[metric] for r in results[(workload, "perfkit")])
            label = {"rps": "req/s", "p50": "latency p50 ms", "p95": "latency p95 ms"}[metric]
            print(f"| {workload} | {label} | {plain:.1f} | {ours:.1f} | {ours / plain:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
