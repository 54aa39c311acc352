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

Garbage-collector pauses: in every proxy (plain and perfkit) a small
``gc.callbacks`` probe (benchmarks/_gcprobe) logs each collection. A full
collection of the proxy's heap stops every request for ~370 ms and comes two
to four times per 15 s run here, so one more or one fewer moves a run's RPS
by about 2.5% on its own. The
table shows each mode's pause time per run, and the RPS ratio with pauses
taken out (requests / (run time - pause time)): the cost of perfkit's own
work with the collector's timing luck removed. The headline ratio is the
plain one, pauses included. The generation-0 rows show where a run sits on
the spread that proxy processes show with or without perfkit
(docs/overhead.md): the runs with more young collections, cheaper each,
spend less CPU per request outside them.

CPU per request: the proxy's and (under perfkit) its export agent's CPU time
over the measured seconds (read when the warm-up ends and at the end),
divided by the requests measured. Until 2026-11-25 it was over the warm-up
too: a fresh process's first seconds counted, which a proxy that runs for
hours pays once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.litellm_recording_cost import interval  # noqa: E402
from benchmarks.middleware_overhead import cpu_seconds  # noqa: E402
from litellm_perfkit._load import LoadPlan, Workload, run_load  # noqa: E402
from tests.support.litellm_env import VERSIONS  # noqa: E402
from tests.support.mock_server import mock_process  # noqa: E402
from tests.support.proxy import litellm_proxy  # noqa: E402
from litellm_perfkit._bench._launch import ProxyMode  # noqa: E402
from litellm_perfkit._wire._record_rate import DEFAULT_RECORD_RATE  # noqa: E402
from tests.support.servers import jaeger_process  # noqa: E402


GC_PROBE = Path(__file__).resolve().parent / "_gcprobe"
WARMUP_S = 5.0


def measure(url: str, stream: bool, duration: float, concurrency: int, cpu: Callable[[], tuple[float, float]]) -> dict[str, float]:
    """One load run; the CPU of the proxy and of its agents (``cpu``), per
    request over the measured seconds: read when the warm-up ends and again
    at the end, so that a fresh process's first seconds are left out."""
    workload = Workload(url=url, stream=stream, prompt_repeats=150)
    plan = LoadPlan(concurrency=concurrency, duration_s=duration, warmup_s=WARMUP_S, timeout_s=60)
    started = time.monotonic_ns()
    at_warmup_end: list[tuple[float, float]] = []
    timer = threading.Timer(WARMUP_S, lambda: at_warmup_end.append(cpu()))
    timer.start()
    summary = run_load(workload, plan, progress="off")["summary"]
    timer.cancel()
    end = cpu()
    if summary["errors"]:
        raise RuntimeError(f"errors: {summary['errors_by_class']}")
    requests = summary["rps"] * duration
    proxy_ms, agent_ms = ((b - a) / requests * 1e3 for a, b in zip(at_warmup_end[0], end))
    return {
        "rps": summary["rps"],
        "proxy_cpu_ms": proxy_ms,
        "agent_cpu_ms": agent_ms,
        "cpu_with_agent_ms": proxy_ms + agent_ms,
        "p50": summary["latency_ms"]["p50"],
        "p95": summary["latency_ms"]["p95"],
        "window_start_ns": started + int(WARMUP_S * 1e9),
        "window_end_ns": time.monotonic_ns(),
    }


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (perfkit's export agent), not itself."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def probe_log(log_prefix: Path) -> Iterator[tuple[int, int, int, int, list[int]]]:
    """The collections the probe (benchmarks/_gcprobe) logged, every process's:
    (ended, pause, generation, collected, the counts the probe was asked for)."""
    for log in log_prefix.parent.glob(log_prefix.name + ".*"):
        for line in log.read_text().splitlines():
            ended, pause, generation, collected, *counts = map(int, line.split())
            yield ended, pause, generation, collected, counts


def collector_pauses(log_prefix: Path, start_ns: int, end_ns: int) -> dict[str, float]:
    """Pause seconds, full collections, and young (generation 0) collections
    with their mean pause, that the probe logged inside the window; the
    objects full collections freed; with the probe's counts
    (PERFKIT_BENCH_GC_COUNT=1), the objects promoted into the oldest
    generation per second between consecutive full collections."""
    pause_ns, full, young, young_ns, freed_by_full = 0, 0, 0, 0, 0
    promoted, between_ns, last_full = 0, 0, None
    for ended, pause, generation, collected, oldest in probe_log(log_prefix):
        inside = min(ended, end_ns) - max(ended - pause, start_ns)
        if inside > 0:
            pause_ns += inside
            full += generation == 2
            freed_by_full += collected if generation == 2 else 0
            if generation == 0:
                young, young_ns = young + 1, young_ns + pause
        if generation == 2 and oldest:
            if last_full is not None and ended - pause >= start_ns and ended <= end_ns:
                promoted += oldest[0] - last_full[1]
                between_ns += ended - pause - last_full[0]
            last_full = (ended, oldest[1])
    result = {"gc_s": pause_ns / 1e9, "full_collections": full, "young_collections": young, "young_pause_ms": young_ns / max(1, young) / 1e6,
              "freed_by_full": freed_by_full}  # fmt: skip
    if between_ns:
        result["promoted_per_s"] = promoted / between_ns * 1e9
    return result


def collector_counts(log_prefix: Path, start_ns: int, end_ns: int) -> dict[str, float]:
    """What the collector did in the window, from the probe's logs (PERFKIT_BENCH_GC_PROMOTED=1): objects
    promoted into the oldest generation, full collections, and their pause in seconds."""
    promoted, full, full_ns = 0, 0, 0
    for ended, pause, generation, _, counts in probe_log(log_prefix):
        if not start_ns <= ended <= end_ns:
            continue
        if generation == 1 and counts:
            promoted += counts[0]
        elif generation == 2:
            full, full_ns = full + 1, full_ns + pause
    return {"promoted": promoted, "full": full, "full_s": full_ns / 1e9}


BOOTSTRAP = Path(__file__).resolve().parents[1] / "litellm_perfkit" / "_litellm" / "_bootstrap"
MODES = {
    "plain": "the proxy alone",
    "bootstrap": "plain, with perfkit's sitecustomize first on PYTHONPATH (PERFKIT_RUN unset: it does nothing)",
    "perfkit": "under perfkit run, every request recorded and exported to Jaeger",
    "perfkit-default": "under perfkit run with its default record rate (10 requests a second recorded and exported)",
    "perfkit-nosteps": "PERFKIT_STEPS=off",
    "perfkit-noexport": "perfkit run --exporter none (no export agent)",
}


def mode_settings(mode: str, exporter: tuple[str, ...]) -> tuple[ProxyMode, dict[str, str], tuple[str, ...]]:
    """(plain or perfkit, environment, perfkit run's arguments) of a mode;
    ``A+B`` is perfkit mode A with B's environment too (``perfkit-record-0.1+perfkit-nosteps``)."""
    if "+" in mode:
        first, *more = mode.split("+")
        proxy_mode, env, args = mode_settings(first, exporter)
        for other in more:
            env = {**env, **mode_settings(other, exporter)[1]}
        return proxy_mode, env, args
    if mode == "plain":
        return "plain", {}, ()
    if mode == "bootstrap":
        return "plain", {"PYTHONPATH": os.pathsep.join(map(str, (BOOTSTRAP, BOOTSTRAP.parents[2], GC_PROBE)))}, ()
    if mode == "perfkit":
        return "perfkit", {}, exporter
    if mode == "perfkit-default":
        return "perfkit", {"PERFKIT_RECORD_RATE": str(DEFAULT_RECORD_RATE)}, exporter
    if mode.startswith("perfkit-rate-"):
        return "perfkit", {"PERFKIT_RECORD_RATE": mode.removeprefix("perfkit-rate-")}, exporter
    if mode == "perfkit-nosteps":
        return "perfkit", {"PERFKIT_STEPS": "off"}, exporter
    if mode == "perfkit-noexport":
        return "perfkit", {}, ("--exporter", "none")
    if mode.startswith("perfkit-record-"):
        return "perfkit", {"PERFKIT_RECORD_RATIO": mode.removeprefix("perfkit-record-")}, exporter
    if mode.startswith("perfkit-without-"):
        return "perfkit", {"PERFKIT_LEAVE_OUT": mode.removeprefix("perfkit-without-")}, exporter
    raise SystemExit(f"unknown mode {mode!r}: use {', '.join(MODES)} or perfkit-without-PART")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=VERSIONS[-1], choices=VERSIONS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--modes", default="plain,perfkit", help="interleaved, comma-separated: " + "; ".join(MODES) +
                        "; perfkit-record-R (PERFKIT_RECORD_RATIO=R); perfkit-rate-N (PERFKIT_RECORD_RATE=N); perfkit-without-PART (PERFKIT_LEAVE_OUT=PART: points, middleware, gcwatch, shutdown, profiles, point:STAGE)")
    parser.add_argument("--workloads", default="json,stream", help="json, stream or both")
    parser.add_argument("--count-promotions", action="store_true",
                        help="log the oldest generation's size at each full collection (diagnosis: it lengthens those pauses)")
    parser.add_argument("--promoted-types", action="store_true",
                        help="log which types grew in the oldest generation between full collections (gc-TRIAL-types.PID beside the gc logs; diagnosis)")
    parser.add_argument("--keep-logs", type=Path, help="copy the collector logs here")
    args = parser.parse_args()
    modes = args.modes.split(",")
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    # The driver (this process) and what it starts, Jaeger and the mock, on
    # core 1; the proxy is started with taskset on core 0.
    os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory() as tmp, jaeger_process(Path(tmp)) as jaeger, mock_process("--chunks", "20") as upstream:
        exporter = ("--endpoint", jaeger.otlp_http, "--protocol", "http/protobuf", "--service-name", "bench-litellm")
        for repeat in range(args.repeats):
            order = modes if repeat % 2 == 0 else modes[::-1]
            for mode in order:
                gc_log = Path(tmp) / f"gc-{repeat}-{mode}"
                proxy_mode, extra_env, perfkit_args = mode_settings(mode, exporter)
                env = {"PYTHONPATH": str(GC_PROBE), "PERFKIT_BENCH_GC_LOG": str(gc_log), **extra_env}
                if args.count_promotions:
                    env["PERFKIT_BENCH_GC_COUNT"] = "1"
                if args.promoted_types:
                    env["PERFKIT_BENCH_GC_TYPES"] = "1"
                pids: list[int] = []
                with litellm_proxy(args.version, upstream, Path(tmp), mode=proxy_mode, perfkit_args=perfkit_args, pin_cpu="0", env=env, pids=pids) as url:
                    for workload in args.workloads.split(","):
                        proxy, agents = pids[0], children(pids[0])
                        result = measure(url, workload == "stream", args.duration, args.concurrency,
                                         lambda: (cpu_seconds(proxy), sum(map(cpu_seconds, agents))))  # fmt: skip
                        result.update(collector_pauses(gc_log, int(result.pop("window_start_ns")), int(result.pop("window_end_ns"))))
                        result["freed_by_full_per_request"] = result.pop("freed_by_full") / (result["rps"] * args.duration)
                        if "promoted_per_s" in result:
                            result["promoted_per_request"] = result.pop("promoted_per_s") / result["rps"]
                        results.setdefault((workload, mode), []).append(result)
                        print(f"repeat {repeat + 1} {mode} {workload}: {result}", file=sys.stderr)
        spans = sum(len(t["spans"]) for t in jaeger.traces("bench-litellm"))
        if args.keep_logs:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in Path(tmp).glob("gc-*"):
                shutil.copy(log, args.keep_logs / log.name)
    print(f"\nLiteLLM {args.version}, 1 worker on core 0 (with perfkit's agent), mock + driver + Jaeger on core 1; "
          f"{args.repeats} interleaved repeats x {args.duration:g} s, {args.concurrency} users; medians")  # fmt: skip
    print(f"spans stored in Jaeger (last 1000 traces shown by its API): {spans}\n")
    others = [m for m in modes if m != "plain"]
    print("| workload | metric | plain | " + " | ".join(others) + " | " + " | ".join(f"{m} / plain" for m in others) + " |")
    print("|---|---|" + "---:|" * (1 + 2 * len(others)))
    for workload in args.workloads.split(","):
        for mode in modes:
            for run in results[(workload, mode)]:
                run["rps_outside_gc"] = run["rps"] * args.duration / max(1e-9, args.duration - run["gc_s"])
        for metric in LABELS:
            if any(metric not in r for m in modes for r in results[(workload, m)]):
                continue  # not measured in every run (the promoted count needs two full collections in the window)
            plain = statistics.median(r[metric] for r in results[(workload, "plain")])
            ours = [statistics.median(r[metric] for r in results[(workload, m)]) for m in others]
            digits = 3 if metric.endswith("_ms") else 1
            values = " | ".join(f"{v:.{digits}f}" for v in ours)
            ratios = " | ".join(f"{v / plain:.3f}" if plain else "-" for v in ours)
            print(f"| {workload} | {LABELS[metric]} | {plain:.{digits}f} | {values} | {ratios} |")
    print("\nEach repeat's run against that repeat's plain run: the median of the pairs' ratios, with a 95% interval from order statistics\n")
    print("| workload | mode | RPS / plain | CPU per request / plain, agent included | pairs' CPU ratios, sorted |")
    print("|---|---|---:|---:|---|")
    for workload in args.workloads.split(","):
        plain_runs = results[(workload, "plain")]
        for mode in others:
            pairs = list(zip(plain_runs, results[(workload, mode)]))
            rps = interval([b["rps"] / a["rps"] for a, b in pairs])
            cpu = interval([b["cpu_with_agent_ms"] / a["cpu_with_agent_ms"] for a, b in pairs])
            each = " ".join(f"{b['cpu_with_agent_ms'] / a['cpu_with_agent_ms']:.3f}" for a, b in sorted(pairs, key=lambda p: p[1]["cpu_with_agent_ms"] / p[0]["cpu_with_agent_ms"]))
            print(f"| {workload} | {mode} | {rps[0]:.3f} [{rps[1]:.3f}, {rps[2]:.3f}] | {cpu[0]:.3f} [{cpu[1]:.3f}, {cpu[2]:.3f}] | {each} |")
    return 0


LABELS = {
    "rps": "req/s",
    "p50": "latency p50 ms",
    "p95": "latency p95 ms",
    "proxy_cpu_ms": "proxy CPU ms per request",
    "agent_cpu_ms": "export agent CPU ms per request (on the proxy's core)",
    "cpu_with_agent_ms": "CPU ms per request, export agent included",
    "gc_s": "collector pause s per run",
    "full_collections": "full collections per run",
    "young_collections": "generation-0 collections per run",
    "young_pause_ms": "mean generation-0 pause ms",
    "rps_outside_gc": "req/s outside collector pauses",
    "freed_by_full_per_request": "objects full collections freed, per request",
    "promoted_per_request": "objects promoted to the oldest generation per request (PERFKIT_BENCH_GC_COUNT=1)",
}


if __name__ == "__main__":
    sys.exit(main())
