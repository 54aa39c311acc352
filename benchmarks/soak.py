"""Soak: a long run of an instrumented server whose OTLP backend is down,
then hangs. Does memory or the count of open file descriptors grow with
requests, and is any process left when it stops?

Two targets (``--target``):

- ``app`` (the default): the small instrumented gateway of the fault matrix
  (tests/support/fault_app.py, PerfkitMiddleware in front of a relay to
  ``perfkit mock``, every request recorded); each step is 20% streams the
  client cuts after 50 ms, 40% streams and 40% JSON.
- ``litellm``: the real LiteLLM proxy (``--litellm-version``, 2 workers)
  under ``perfkit run --record-rate all``, with the proxy fault matrix's
  mocks and config (tests/support/proxy_faults.py); each step is 20% streams
  of its ``slow-stream`` model (10 chunks 100 ms apart) the client cuts after
  0.5 s, 40% streams and 40% JSON of the fast model.

``perfkit load`` sends ``--requests`` requests per backend phase, in steps of
``--step``, 16 users. The first phase exports to a backend that refuses
connections, the second to one that accepts and never answers
(tests/support/otlp_faults.py), in the same server process. After each step
it samples RSS, open file descriptors and threads (of each worker, for the
proxy), and prints their growth per 10,000 requests after the first step,
the warm-up: a least-squares slope over the samples with its standard
error, and the range of the growth from one step to the next, scaled to
10,000 requests (the noise). At the end it stops the server with SIGTERM
(the proxy's supervisor alone, as a container stop does) and lists any
process left of those it started (the server, its workers, their export
agents), zombies included::

    python -m benchmarks.soak --requests 100000 --step 10000
    python -m benchmarks.soak --target litellm --requests 100000 --step 10000
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, get_args

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from litellm_perfkit._bench._launch import Children, StartError, free_port, start_mock  # noqa: E402
from litellm_perfkit._export._health import FIELDS  # noqa: E402
from litellm_perfkit._stop import exit_code, signal_name, stop_signals  # noqa: E402
from tests.support import procfs  # noqa: E402
from tests.support.fault_matrix import EXPORT_TIMEOUT_MS, Shape, Usage, app_process, load, usage  # noqa: E402
from tests.support.litellm_env import VERSIONS  # noqa: E402
from tests.support.otlp_faults import FaultyReceiver, faulty_receiver  # noqa: E402
from tests.support.proxy import launched_proxy  # noqa: E402
from tests.support.proxy_faults import UPSTREAMS, _config, _mocks, _served, _snapshot_dir  # noqa: E402

Target = Literal["app", "litellm"]
Mix = tuple[tuple[Shape, float], ...]

JSON = Shape(stream=False, concurrency=16)
STREAM = Shape(stream=True, concurrency=16)
# Cut ones first: their connections have closed by the sample.
# The app's mock stream lasts longer than 50 ms: every one is cut.
APP_MIX: Mix = ((replace(STREAM, client_timeout_s=0.05), 0.2), (STREAM, 0.4), (JSON, 0.4))
# The proxy's slow-stream model lasts 1 s: every one is cut at 0.5 s, mid-stream (or before its
# first byte when the proxy is that slow). More users for them: they mostly wait.
CUT_SLOW = Shape(stream=True, concurrency=48, client_timeout_s=0.5, model="slow-stream")
PROXY_MIX: Mix = ((CUT_SLOW, 0.2), (STREAM, 0.4), (JSON, 0.4))
PROCESSES_LEFT = "processes left 10 s after SIGTERM"


@dataclass
class Server:
    """What a soak drives and samples: ``url``; ``processes()`` names each process
    sampled (the app, or each proxy worker) with its pid."""

    url: str
    mix: Mix
    processes: Callable[[], dict[str, int]]
    stop: Callable[[], list[int]]  # SIGTERM; the processes left 10 s later (zombies too)
    counts: Callable[[], tuple[int, dict[str, int]]]  # served (its own count), and perfkit's counts at exit
    served_by: str  # what counted the requests served
    receiver: FaultyReceiver
    notes: list[str] = field(default_factory=list)
    warmup: int = 0  # requests sent before the first phase
    client_errors: dict[str, int] = field(default_factory=dict)  # what the load driver saw fail, by class


def slope_per_10k(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares growth of the value per 10,000 requests, and its standard error (nan with too few points)."""
    n = len(points)
    if n < 2:
        return float("nan"), float("nan")
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if not spread:
        return float("nan"), float("nan")
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    if n < 3:
        return 10_000 * slope, float("nan")
    residuals = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in points)
    return 10_000 * slope, 10_000 * math.sqrt(residuals / (n - 2) / spread)


def step_range_per_10k(points: list[tuple[int, float]]) -> tuple[float, float]:
    """The smallest and largest change from one sample to the next, per 10,000 requests."""
    changes = [10_000 * (y1 - y0) / (x1 - x0) for (x0, y0), (x1, y1) in zip(points, points[1:]) if x1 > x0]
    return (min(changes), max(changes)) if changes else (float("nan"), float("nan"))


Samples = list[tuple[int, dict[str, Usage]]]


def phase(server: Server, requests: int, step: int, name: str) -> Samples:
    samples: Samples = []
    sent, started = 0, time.monotonic()
    while sent < requests:
        size = min(step, requests - sent)
        for shape, share in server.mix:
            summary = load(server.url, shape, requests=max(1, round(size * share)))["summary"]
            sent += int(summary["requests"])
            for error, count in summary["errors_by_class"].items():
                server.client_errors[error] = server.client_errors.get(error, 0) + int(count)
        sampled = {label: usage(pid) for label, pid in server.processes().items()}
        samples.append((sent, sampled))
        said = "; ".join(f"{k} RSS {u.rss_mib:.1f} MiB, {u.fds} fds, {u.threads} threads" for k, u in sampled.items())
        print(f"  {name}: {sent:,} requests, {time.monotonic() - started:.0f} s: {said}", file=sys.stderr, flush=True)
    return samples


def _gone(pids: set[int], timeout_s: float) -> list[int]:
    """Those of ``pids`` still there (zombies too) after up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(procfs.state(p) is not None for p in pids):
        time.sleep(0.1)
    return [p for p in pids if procfs.state(p) is not None]


@contextlib.contextmanager
def app_server(workdir: Path) -> Iterator[Server]:
    with Children() as children:
        # Each stream's 10 chunks 10 ms apart: the cut clients leave mid-stream.
        upstream = start_mock(children, "--ttft-ms", "1", "--itl-ms", "10", "--chunks", "10")
        with faulty_receiver("hung", running=False) as receiver:
            with app_process(upstream, workdir, receiver.url) as (child, port):
                pid = child.process.pid

                def stop() -> list[int]:
                    seen = set(procfs.agents_of(pid)) | {pid}
                    child.process.send_signal(signal.SIGTERM)
                    child.process.wait(120)
                    return _gone(seen, 10) + procfs.children(pid)

                def counts() -> tuple[int, dict[str, int]]:
                    health = orjson.loads(next(workdir.glob("*.health")).read_bytes())
                    return int((workdir / "served").read_text()), {k: int(health[k]) for k in FIELDS}

                url = f"http://127.0.0.1:{port}"
                yield Server(url, APP_MIX, lambda: {"app": pid}, stop, counts, "the app (its own count)", receiver)


@contextlib.contextmanager
def litellm_server(workdir: Path, version: str) -> Iterator[Server]:
    ports = {model: free_port() for model in UPSTREAMS}
    with _mocks(ports), faulty_receiver("hung", running=False) as receiver:
        proxy_args = ("--endpoint", receiver.url, "--protocol", "http/json", "--record-rate", "all")
        env = {"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_EXPORTER_OTLP_TIMEOUT": str(EXPORT_TIMEOUT_MS)}
        with launched_proxy(
            version, None, workdir, config=_config(ports), workers=2, perfkit_args=proxy_args, env=env, timeout_s=600
        ) as proxy:
            supervisor, log = proxy.pid, Path(proxy.child.log.name)
            snapshots = _snapshot_dir(supervisor)
            first, notes = sorted(procfs.workers_of(supervisor)), list[str]()

            def workers() -> dict[str, int]:
                now = sorted(procfs.workers_of(supervisor))
                if now != first:  # uvicorn replaced a worker: its samples start again
                    notes.append(f"workers {first} became {now}")
                    first[:] = now
                return {f"worker {pid}": pid for pid in now}

            def stop() -> list[int]:
                workers = procfs.workers_of(supervisor)
                tree = {supervisor, *workers, *(a for p in [supervisor, *workers] for a in procfs.agents_of(p))}
                os.kill(supervisor, signal.SIGTERM)  # the supervisor alone, as a container stop does
                proxy.child.process.wait(120)
                return _gone(tree, 10)

            def counts() -> tuple[int, dict[str, int]]:
                totals = dict.fromkeys(FIELDS, 0)
                for path in snapshots.glob("*.health") if snapshots else ():
                    health = orjson.loads(path.read_bytes())
                    for name in FIELDS:
                        totals[name] += int(health.get(name, 0))
                return _served(log), totals

            # Each route's first requests, on each worker.
            warmup = sum(int(load(proxy.url, shape, requests=50)["summary"]["requests"]) for shape, _ in PROXY_MIX)
            access_log = "the proxy (uvicorn's access log)"
            yield Server(proxy.url, PROXY_MIX, workers, stop, counts, access_log, receiver, notes, warmup)


def report(rows: list[tuple[str, Samples]]) -> None:
    print(
        "| backend | requests | process | RSS MiB after step 1 → end | RSS per 10k (± s.e.) | step to step per 10k "
        "| fds | fds per 10k (± s.e.) | threads |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, samples in rows:
        settled = samples[1:] if len(samples) > 1 else samples
        for label in settled[0][1]:
            series = [(n, u[label]) for n, u in settled if label in u]
            first, last = series[0][1], series[-1][1]
            rss = [(n, u.rss_mib) for n, u in series]
            fds = [(n, float(u.fds)) for n, u in series]
            (r, r_se), (f, f_se), (low, high) = slope_per_10k(rss), slope_per_10k(fds), step_range_per_10k(rss)
            print(
                f"| {name} | {samples[-1][0]:,} | {label} | {first.rss_mib:.1f} → {last.rss_mib:.1f} "
                f"| {r:+.2f} ± {r_se:.2f} MiB | {low:+.2f} … {high:+.2f} MiB | {first.fds} → {last.fds} "
                f"| {f:+.2f} ± {f_se:.2f} | {first.threads} → {last.threads} |"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=get_args(Target), default="app", help="(default: app)")
    parser.add_argument("--litellm-version", default=VERSIONS[-1], choices=VERSIONS, help="--target litellm's")
    parser.add_argument("--requests", type=int, default=100_000, help="per backend phase (default: 100,000)")
    parser.add_argument("--step", type=int, default=10_000, help="requests between samples (default: 10,000)")
    args = parser.parse_args()
    try:
        # SIGTERM and SIGHUP unwind like Ctrl-C: each server's block stops what it started.
        with stop_signals():
            return soak(args.target, args.litellm_version, args.requests, args.step)
    except KeyboardInterrupt as stop:
        print(f"soak: stopped by {signal_name(stop)}", file=sys.stderr)
        return exit_code(stop)
    except StartError as failed:  # its first line says which server; the rest is the end of its log
        print(f"soak: {failed}", file=sys.stderr)
        return 1


def soak(target: Target, version: str, requests: int, step: int) -> int:
    rows: list[tuple[str, Samples]] = []
    with tempfile.TemporaryDirectory(prefix="perfkit-soak-") as work:
        workdir = Path(work)
        started = app_server(workdir) if target == "app" else litellm_server(workdir, version)
        with started as server:
            for name in ("down", "hung"):
                if name == "hung":
                    server.receiver.start()
                rows.append((name, phase(server, requests, step, name)))
            left = server.stop()
            served, health = server.counts()
    sent = sum(samples[-1][0] for _, samples in rows)
    report(rows)
    for note in server.notes:
        print(f"note: {note}")
    warmup = f" (and {server.warmup:,} warm-up requests before)" if server.warmup else ""
    print(f"sent by perfkit load: {sent:,}{warmup}; served by {server.served_by}: {served:,}")
    failed = ", ".join(f"{k} {v:,}" for k, v in sorted(server.client_errors.items())) or "none"
    print(f"failed at the client (the cut streams among them): {failed}")
    print(f"perfkit's counts at exit: {orjson.dumps(health).decode()}")
    print(f"{PROCESSES_LEFT}: {len(left)}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
