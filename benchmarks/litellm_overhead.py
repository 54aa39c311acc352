"""What perfkit costs the real LiteLLM proxy: pairs of fresh proxies, measured in interleaved bursts.

A pair (with more than two modes, a group) is one fresh proxy per mode
(``--modes``; the first is the baseline), started together and alive side
by side: 1 worker each, all pinned to core 0 with perfkit's export agents,
every recorded span exported over OTLP/HTTP protobuf to a local Jaeger. The
mock provider, this driver and Jaeger share core 1. The proxies take turns
in bursts of exactly ``--requests`` requests from 32 users, as
``perfkit bench --perturbation`` measures (litellm_perfkit/_bench/_bursts.py):
the machine's drift falls on every mode alike, and each proxy's CPU (worker,
and agent apart), read around all its measured bursts plus the export
schedule, is charged to exactly the requests that caused it.

    python -m benchmarks.litellm_overhead --version 1.103.0 --pairs 8 --modes plain,perfkit-default

A proxy process keeps its own speed for its whole life (identical plain
processes 1-7% apart here): only more pairs of fresh processes average that,
so the result is the median of the pairs' ratios with a 95% interval, and
``--modes plain,plain`` measures what the harness reports when both sides
are the same (docs/overhead.md, "How perfkit's cost is measured").

A pair's ratio is its mode's CPU per request (agent included) over the
baseline's, and its RPS (requests over the bursts' wall time) over the
baseline's. Target (issue 18): CPU at most 1.03x, RPS at least 0.97x.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._pinning import pin  # noqa: E402
from benchmarks.litellm_recording_cost import interval  # noqa: E402
from litellm_perfkit._bench._bursts import Target, take_turns  # noqa: E402
from litellm_perfkit._bench._launch import ProxyMode, process_tree  # noqa: E402
from litellm_perfkit._export._settings import SCHEDULE_DELAY_S  # noqa: E402
from litellm_perfkit._stop import stop_signals  # noqa: E402
from litellm_perfkit._wire._names import AGENT_MODULE  # noqa: E402
from litellm_perfkit._wire._record_rate import DEFAULT_RECORD_RATE  # noqa: E402
from tests.support.litellm_env import VERSIONS  # noqa: E402
from tests.support.mock_server import mock_process  # noqa: E402
from tests.support.proxy import litellm_proxy  # noqa: E402
from tests.support.servers import jaeger_process  # noqa: E402

GC_PROBE = Path(__file__).resolve().parent / "_gcprobe"
BOOTSTRAP = Path(__file__).resolve().parents[1] / "litellm_perfkit" / "_litellm" / "_bootstrap"
REQUESTS = {"json": 640, "stream": 160}  # a burst: about 3 s of a saturated proxy on this machine
MODES = {
    "plain": "the proxy alone",
    "bootstrap": "plain, with perfkit's sitecustomize first on PYTHONPATH (PERFKIT_RUN unset: it does nothing)",
    "perfkit": "under perfkit run, every request recorded and exported to Jaeger",
    "perfkit-default": f"under perfkit run as users run it: at most {DEFAULT_RECORD_RATE:g} requests a second recorded and exported",
    "perfkit-nosteps": "PERFKIT_STEPS=off",
    "perfkit-noexport": "perfkit run --exporter none (no export agent)",
    "perfkit-agent-apart": "perfkit, its export agent moved onto the driver's core after the warm-up",
    "perfkit-agent-batch": "perfkit, its export agent under SCHED_BATCH (no wake-up preemption) after the warm-up",
}
# What the harness does to a mode's export agents after the warm-up (the modes above that name them).
AGENT_MOVES = {"perfkit-agent-apart": "apart", "perfkit-agent-batch": "batch"}


def mode_settings(mode: str, exporter: tuple[str, ...]) -> tuple[ProxyMode, dict[str, str], tuple[str, ...]]:
    """(plain or perfkit, environment, perfkit run's arguments) of a mode;
    ``A+B`` is perfkit mode A with B's environment too (``perfkit-default+perfkit-nosteps``)."""
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
    if mode == "perfkit" or mode in AGENT_MOVES:
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
    if mode.startswith("perfkit-delay-"):
        return (
            "perfkit",
            {
                "PERFKIT_RECORD_RATE": str(DEFAULT_RECORD_RATE),
                "OTEL_BSP_SCHEDULE_DELAY": mode.removeprefix("perfkit-delay-"),
            },
            exporter,
        )
    raise SystemExit(
        f"unknown mode {mode!r}: use {', '.join(MODES)}, perfkit-record-R, perfkit-rate-N, perfkit-delay-MS or perfkit-without-PART"
    )


def labels(modes: list[str]) -> list[str]:
    """Each mode's name, numbered when it comes twice (``plain,plain``: the harness against itself)."""
    return [
        mode if modes[:i].count(mode) == 0 else f"{mode} ({modes[:i].count(mode) + 1})" for i, mode in enumerate(modes)
    ]


def probe_log(log_prefix: Path) -> Iterator[tuple[int, int, int, int, list[int]]]:
    """The collections the probe (benchmarks/_gcprobe) logged, every process's:
    (ended, pause, generation, collected, the counts the probe was asked for)."""
    for log in log_prefix.parent.glob(log_prefix.name + ".*"):
        for line in log.read_text().splitlines():
            ended, pause, generation, collected, *counts = map(int, line.split())
            yield ended, pause, generation, collected, counts


def young_types(log_prefix: Path, start_ns: int, end_ns: int) -> dict[str, float]:
    """The tracked objects of each type in the young generations as a generation-1 collection started,
    averaged over the collections in the window (the probe's ``-young`` log, ``--young``)."""
    total: Counter[str] = Counter()
    snapshots = 0
    for log in log_prefix.parent.glob(log_prefix.name + "-young.*"):
        for line in log.read_text().splitlines():
            at, *counts = line.split()
            if start_ns <= int(at) <= end_ns:
                snapshots += 1
                total.update({name: int(n) for name, n in (c.rsplit("=", 1) for c in counts)})
    return {name: n / snapshots for name, n in total.items()} if snapshots else {}


def full_collections(log_prefix: Path, start_ns: int, end_ns: int) -> tuple[int, float]:
    """Full collections the probe logged in the window, and their pause in seconds."""
    found = [
        pause
        for ended, pause, generation, _, _ in probe_log(log_prefix)
        if generation == 2 and start_ns <= ended <= end_ns
    ]
    return len(found), sum(found) / 1e9


class Proxy(NamedTuple):
    label: str
    url: str
    pid: int
    gc_log: Path
    agent_move: str | None  # AGENT_MOVES' value for its mode


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""  # gone


def move_agents(proxy: Proxy) -> None:
    """A proxy's export agents onto core 1 (the driver's, off the proxies' core 0), or under
    SCHED_BATCH on their core: is what the worker pays beside its agent the sharing of a core?"""
    deadline = time.monotonic() + 2 * SCHEDULE_DELAY_S + 5  # the export thread starts it at its next drain
    while not (agents := [pid for pid in process_tree(proxy.pid) if AGENT_MODULE.encode() in _cmdline(pid)]):
        if time.monotonic() > deadline:
            raise SystemExit(f"{proxy.label}: no export agent to move after the warm-up")
        time.sleep(0.2)
    for pid in agents:
        if proxy.agent_move == "apart":
            pin(pid, {1})
        else:
            for task in os.listdir(f"/proc/{pid}/task"):
                os.sched_setscheduler(int(task), os.SCHED_BATCH, os.sched_param(0))
    print(f"{proxy.label}: {len(agents)} export agents {proxy.agent_move}", file=sys.stderr, flush=True)


class Measured(NamedTuple):
    """One proxy over its measured bursts."""

    worker_ms: float  # worker CPU per request
    agent_ms: float  # export agent CPU per request
    rps: float  # requests over the bursts' wall time
    requests: int  # served in the measured bursts
    full: int  # full collections in them (--collector)
    full_pause_ms: float  # their pause per request
    young: dict[str, float]  # tracked objects per type in the young generations (--young)

    @property
    def full_per_10000(self) -> float:
        return self.full / self.requests * 1e4

    @property
    def cpu_ms(self) -> float:
        return self.worker_ms + self.agent_ms


def measure_group(proxies: list[Proxy], stream: bool, args: argparse.Namespace, settle_s: float) -> dict[str, Measured]:
    """Warm-up bursts, then ``args.rounds`` interleaved ones; each proxy's totals over the measured bursts."""
    requests = args.requests or REQUESTS["stream" if stream else "json"]
    targets = [Target(p.label, p.url, p.pid) for p in proxies]
    take_turns(targets, requests, args.concurrency, args.warmup, settle_s=0.0, stream=stream)
    for proxy in proxies:
        if proxy.agent_move is not None:
            move_agents(proxy)
    start_ns = time.monotonic_ns()
    served = take_turns(targets, requests, args.concurrency, args.rounds, settle_s, stream=stream).totals
    end_ns = time.monotonic_ns()
    result = {}
    for proxy in proxies:
        measured = served[proxy.label]
        cpu_ms, agent_ms = measured.cpu_ms or 0.0, measured.agent_ms or 0.0
        full, pause_s = full_collections(proxy.gc_log, start_ns, end_ns) if args.collector else (0, 0.0)
        result[proxy.label] = Measured(
            cpu_ms - agent_ms,
            agent_ms,
            measured.rps,
            measured.requests,
            full,
            pause_s / measured.requests * 1e3,
            young_types(proxy.gc_log, start_ns, end_ns) if args.young else {},
        )
    return result


def _say_pair(number: int, pairs: int, names: list[str], group: dict[str, Measured], collector: bool) -> None:
    """One pair's CPU per request and rate (and full collections), each mode against the first, on stderr:
    a run stopped early keeps what its pairs measured."""
    base = group[names[0]]
    print(
        f"pair {number + 1}/{pairs}: "
        + "; ".join(
            f"{name} {m.cpu_ms:.3f} ms ({m.agent_ms:.3f} agent), {m.rps:.1f} req/s"
            + (f", {m.full} full collections in {m.requests} requests" if collector else "")
            + (f", {m.cpu_ms / base.cpu_ms:.3f}x" if name != names[0] else "")
            for name, m in group.items()
        ),
        file=sys.stderr,
        flush=True,
    )


def run(args: argparse.Namespace) -> tuple[list[str], list[dict[str, Measured]], int]:
    modes = args.modes.split(",")
    names = labels(modes)
    settle_s = (
        max(float(mode_settings(m, ())[1].get("OTEL_BSP_SCHEDULE_DELAY", SCHEDULE_DELAY_S * 1e3)) / 1e3 for m in modes)
        + 1.0
    )
    groups: list[dict[str, Measured]] = []
    # The driver (this process) and what it starts, Jaeger and the mock, on core 1; the proxies on core 0.
    os.sched_setaffinity(0, {1})
    with (
        tempfile.TemporaryDirectory() as tmp,
        jaeger_process(Path(tmp)) as jaeger,
        mock_process("--chunks", "20") as upstream,
    ):
        exporter = ("--endpoint", jaeger.otlp_http, "--protocol", "http/protobuf", "--service-name", "bench-litellm")
        for number in range(args.pairs):
            # Started in rotating order too: no mode is always the first process of its group.
            order = list(range(len(modes)))[number % len(modes) :] + list(range(len(modes)))[: number % len(modes)]
            with contextlib.ExitStack() as stack:
                proxies = {}
                for i in order:
                    proxy_mode, env, perfkit_args = mode_settings(modes[i], exporter)
                    workdir = Path(tmp) / f"{number}-{i}"
                    workdir.mkdir()
                    gc_log = workdir / "gc"
                    if args.collector or args.young:
                        env = {
                            **env,
                            "PYTHONPATH": os.pathsep.join(filter(None, (env.get("PYTHONPATH"), str(GC_PROBE)))),
                            "PERFKIT_BENCH_GC_LOG": str(gc_log),
                            **({"PERFKIT_BENCH_GC_YOUNG": "1"} if args.young else {}),
                        }
                    pids: list[int] = []
                    url = stack.enter_context(
                        litellm_proxy(
                            args.version,
                            upstream,
                            workdir,
                            mode=proxy_mode,
                            perfkit_args=perfkit_args,
                            pin_cpu="0",
                            env=env,
                            pids=pids,
                        )
                    )
                    move = next((AGENT_MOVES[m] for m in modes[i].split("+") if m in AGENT_MOVES), None)
                    proxies[i] = Proxy(names[i], url, pids[0], gc_log, move)
                group = measure_group(
                    [proxies[i] for i in range(len(modes))], args.workload == "stream", args, settle_s
                )
            groups.append(group)
            _say_pair(number, args.pairs, names, group, args.collector)
        spans = sum(len(t["spans"]) for t in jaeger.traces("bench-litellm"))
    return names, groups, spans


def report(args: argparse.Namespace, names: list[str], groups: list[dict[str, Measured]], spans: int) -> None:
    base = names[0]
    print(
        f"\nLiteLLM {args.version}, {args.workload}: {len(groups)} pairs of fresh proxies (1 worker each, with perfkit's agents, on core 0; "
        f"mock, driver and Jaeger on core 1), {args.rounds} interleaved bursts of {args.requests or REQUESTS[args.workload]} requests "
        f"per proxy after {args.warmup} warm-up, {args.concurrency} users"
    )
    print(f"spans stored in Jaeger (last 1000 traces shown by its API): {spans}\n")
    print(
        "| mode | CPU ms per request (worker) | export agent | together | req/s | CPU / "
        + base
        + ", median of pairs [95%] | RPS / "
        + base
        + ", median of pairs [95%] | ratio of medians: CPU, RPS |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    medians = {
        name: {
            field: statistics.median(getattr(g[name], field) for g in groups)
            for field in ("worker_ms", "agent_ms", "cpu_ms", "rps")
        }
        for name in names
    }
    for name in names:
        m = medians[name]
        row = f"| {name} | {m['worker_ms']:.3f} | {m['agent_ms']:.3f} | {m['cpu_ms']:.3f} | {m['rps']:.1f} |"
        if name == base:
            print(row + " | | |")
            continue
        cpu = interval([g[name].cpu_ms / g[base].cpu_ms for g in groups])
        rps = interval([g[name].rps / g[base].rps for g in groups])
        print(
            row + f" {cpu[0]:.3f} [{cpu[1]:.3f}, {cpu[2]:.3f}] | {rps[0]:.3f} [{rps[1]:.3f}, {rps[2]:.3f}] | "
            f"{m['cpu_ms'] / medians[base]['cpu_ms']:.3f}, {m['rps'] / medians[base]['rps']:.3f} |"
        )
    print("\nEach pair's CPU ratio, sorted:")
    for name in names[1:]:
        print(f"- {name}: " + " ".join(f"{r:.3f}" for r in sorted(g[name].cpu_ms / g[base].cpu_ms for g in groups)))
    if args.collector:
        report_collections(names, groups)


def report_collections(names: list[str], groups: list[dict[str, Measured]]) -> None:
    """Full collections per 10,000 requests: each pair's, and each mode's count over all pairs against the
    baseline's as a rate ratio with its exact 95% interval (an interval that holds 1: within the noise)."""
    base = names[0]
    print("\nFull collections per 10,000 requests (benchmarks/_gcprobe), each pair's, sorted:")
    for name in names:
        per_pair = " ".join(
            f"{g[name].full_per_10000:.1f}" for g in sorted(groups, key=lambda g: g[name].full_per_10000)
        )
        pause = statistics.median(g[name].full_pause_ms for g in groups)
        print(f"- {name}: {per_pair} (their pause, median of pairs: {pause:.3f} ms per request)")
    base_full, base_requests = (sum(getattr(g[base], f) for g in groups) for f in ("full", "requests"))
    for name in names[1:]:
        full, requests = (sum(getattr(g[name], f) for g in groups) for f in ("full", "requests"))
        ratio, low, high = rate_ratio(full, requests, base_full, base_requests)
        differences = sorted(g[name].full_per_10000 - g[base].full_per_10000 for g in groups)
        above = sum(d > 0 for d in differences)
        print(
            f"- {name} against {base}, all pairs: {full} in {requests} requests against {base_full} in "
            f"{base_requests}; rate ratio {ratio:.3f} [{low:.3f}, {high:.3f}]; each pair's difference, sorted: "
            + " ".join(f"{d:+.1f}" for d in differences)
            + f" ({above} of {len(groups)} above)"
        )


def rate_ratio(count: int, exposure: int, base_count: int, base_exposure: int) -> tuple[float, float, float]:
    """Two Poisson rates' ratio and its exact 95% interval: given both counts' sum, the first is binomial,
    so the Clopper-Pearson interval of its share maps onto the ratio."""
    total = count + base_count
    scale = base_exposure / exposure
    if total == 0:
        return math.nan, 0.0, math.inf

    log_comb = [math.lgamma(total + 1) - math.lgamma(k + 1) - math.lgamma(total - k + 1) for k in range(total + 1)]

    def tail(p: float, at_least: bool) -> float:
        ks = range(count, total + 1) if at_least else range(count + 1)
        log_p, log_q = math.log(p), math.log1p(-p)
        return sum(math.exp(log_comb[k] + k * log_p + (total - k) * log_q) for k in ks)

    def solve(at_least: bool) -> float:
        low, high = 0.0, 1.0  # the tail grows with p when at_least, else shrinks
        for _ in range(60):
            mid = (low + high) / 2
            if (tail(mid, at_least) < 0.025) == at_least:
                low = mid
            else:
                high = mid
        return (low + high) / 2

    def odds(p: float) -> float:
        return p / (1 - p) * scale if p < 1 else math.inf

    share_low = 0.0 if count == 0 else solve(at_least=True)
    share_high = 1.0 if count == total else solve(at_least=False)
    ratio = count / base_count * scale if base_count else math.inf
    return ratio, odds(share_low), odds(share_high)


TIMELINE_TYPE = "litellm_perfkit._core._timeline.Timeline"


def report_young(names: list[str], groups: list[dict[str, Measured]], top: int = 12) -> None:
    """The types each mode adds to the young generations, against the first: the median over the pairs,
    and per recorded request there (a timeline each), which does not depend on how many were in flight."""
    base = names[0]
    for name in names[1:]:
        types = {t for g in groups for t in (*g[name].young, *g[base].young)}
        added = {
            t: statistics.median(g[name].young.get(t, 0.0) - g[base].young.get(t, 0.0) for g in groups) for t in types
        }
        timelines = statistics.median(g[name].young.get(TIMELINE_TYPE, 0.0) for g in groups) or float("nan")
        total = statistics.median(sum(g[name].young.values()) - sum(g[base].young.values()) for g in groups)
        print(
            f"\nTracked objects {name} adds to the young generations as a generation-1 collection starts "
            f"(benchmarks/_gcprobe, mean over the collections, median of pairs): {total:+.0f} in all, "
            f"{timelines:.1f} timelines (recorded requests) among them"
        )
        print(f"\n| type | added | per timeline | {base} |\n|---|---:|---:|---:|")
        for t, n in sorted(added.items(), key=lambda item: -abs(item[1]))[:top]:
            print(
                f"| {t} | {n:+.1f} | {n / timelines:+.2f} | "
                f"{statistics.median(g[base].young.get(t, 0.0) for g in groups):.1f} |"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=VERSIONS[-1], choices=VERSIONS)
    parser.add_argument(
        "--modes",
        default="plain,perfkit-default",
        help="comma-separated, the first is the baseline: "
        + "; ".join(f"{k}: {v}" for k, v in MODES.items())
        + "; perfkit-record-R (PERFKIT_RECORD_RATIO=R); perfkit-rate-N (PERFKIT_RECORD_RATE=N); perfkit-delay-MS (the default rate, OTEL_BSP_SCHEDULE_DELAY=MS); "
        "perfkit-without-PART (PERFKIT_LEAVE_OUT=PART: points, middleware, gcwatch, shutdown, profiles, point:STAGE); A+B: A with B's environment; "
        "a mode given twice is measured against itself",
    )
    parser.add_argument("--pairs", type=int, default=8, help="groups of fresh proxies, one per mode")
    parser.add_argument("--rounds", type=int, default=10, help="measured bursts per proxy")
    parser.add_argument("--warmup", type=int, default=2, help="bursts per proxy before measuring")
    parser.add_argument("--requests", type=int, default=0, help="requests per burst (default: 640 json, 160 stream)")
    parser.add_argument("--workload", default="json", choices=("json", "stream"))
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--collector",
        action="store_true",
        help="load the collector probe into every proxy: full collections and their pause per request",
    )
    parser.add_argument(
        "--young",
        action="store_true",
        help="the collector probe's census: the tracked objects each mode adds to the young generations "
        "as they are collected (what a collection promotes), by type; it costs the proxies CPU",
    )
    args = parser.parse_args()
    with stop_signals():  # SIGTERM too stops every proxy, Jaeger and the mock on its way out
        names, groups, spans = run(args)
    report(args, names, groups, spans)
    if args.young:
        report_young(names, groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
