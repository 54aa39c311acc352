"""Soak: a long run of an instrumented app whose OTLP backend is down, then
hangs. Does memory or the count of open file descriptors grow with requests?

The small instrumented gateway of the fault matrix (tests/support/fault_app.py,
PerfkitMiddleware in front of a relay to ``perfkit mock``, every request
recorded) serves ``--requests`` requests per backend phase from ``perfkit
load``, in steps of ``--step``: each step is 20% streams the client cuts
short, 40% streams and 40% JSON. The first phase exports to a backend that
refuses connections, the second to one that accepts and never answers
(tests/support/otlp_faults.py). After each step it samples the app's RSS,
open file descriptors and threads, and prints their growth per 10,000
requests after the first step (a least-squares slope over the samples).
At the end it stops the app (SIGTERM) and lists any process left of those
it started (the app, its export agents), zombies included::

    python -m benchmarks.soak --requests 100000 --step 10000
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from litellm_perfkit._bench._launch import Children, start_mock  # noqa: E402
from tests.support.fault_matrix import Shape, Usage, _children, _state, agents_of, app_process, load, usage  # noqa: E402
from tests.support.otlp_faults import faulty_receiver  # noqa: E402

JSON = Shape(stream=False, concurrency=16)
STREAM = Shape(stream=True, concurrency=16)
CUT = replace(STREAM, client_timeout_s=0.05)  # the mock's stream lasts longer: every one is cut
MIX = ((CUT, 0.2), (STREAM, 0.4), (JSON, 0.4))  # cut ones first: their connections have closed by the sample


def slope_per_10k(points: list[tuple[int, float]]) -> float:
    """Least-squares growth of the value per 10,000 requests."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return 10_000 * sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else float("nan")


def phase(url: str, pid: int, requests: int, step: int, name: str) -> list[tuple[int, Usage]]:
    samples: list[tuple[int, Usage]] = []
    sent, started = 0, time.monotonic()
    while sent < requests:
        size = min(step, requests - sent)
        for shape, share in MIX:
            part = max(1, round(size * share))
            result = load(url, shape, requests=part)
            sent += int(result["summary"]["requests"])
        samples.append((sent, usage(pid)))
        last = samples[-1][1]
        print(
            f"  {name}: {sent:,} requests, {time.monotonic() - started:.0f} s: RSS {last.rss_mib:.1f} MiB, "
            f"{last.fds} fds, {last.threads} threads",
            file=sys.stderr,
            flush=True,
        )
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000, help="per backend phase (default: 100,000)")
    parser.add_argument("--step", type=int, default=10_000, help="requests between samples (default: 10,000)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="perfkit-soak-") as work, Children() as children:
        workdir = Path(work)
        # Each stream's 10 chunks 10 ms apart: the CUT clients leave mid-stream.
        upstream = start_mock(children, "--ttft-ms", "1", "--itl-ms", "10", "--chunks", "10")
        with faulty_receiver("hung", running=False) as receiver:
            with app_process(upstream, workdir, receiver.url) as (child, port):
                url, pid = f"http://127.0.0.1:{port}", child.process.pid
                for name in ("down", "hung"):
                    if name == "hung":
                        receiver.start()
                    samples = phase(url, pid, args.requests, args.step, name)
                    rows.append((name, samples))
                seen = set(agents_of(pid)) | {pid}
                child.process.send_signal(signal.SIGTERM)
                child.process.wait(120)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and any(_state(p) is not None for p in seen):
                    time.sleep(0.1)
                left = [p for p in seen if _state(p) is not None] + _children(pid)
        health = next(workdir.glob("*.health")).read_text()
        served = int((workdir / "served").read_text())
    sent = sum(samples[-1][0] for _, samples in rows)
    print("| backend | requests | RSS MiB after step 1 → end | RSS per 10k | fds | fds per 10k | threads |")
    print("|---|---|---|---|---|---|---|")
    for name, samples in rows:
        settled = samples[1:] if len(samples) > 1 else samples
        first, last = settled[0][1], settled[-1][1]
        rss = slope_per_10k([(n, u.rss_mib) for n, u in settled])
        fds = slope_per_10k([(n, float(u.fds)) for n, u in settled])
        print(
            f"| {name} | {samples[-1][0]:,} | {first.rss_mib:.1f} → {last.rss_mib:.1f} | {rss:+.2f} MiB "
            f"| {first.fds} → {last.fds} | {fds:+.2f} | {first.threads} → {last.threads} |"
        )
    print(f"sent by perfkit load: {sent:,}; served by the app (its own count): {served:,}")
    print(f"perfkit's counts at exit: {health}")
    print(f"processes left 10 s after SIGTERM: {len(left)}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
