"""How much of the LiteLLM proxy's request time is garbage-collector pauses.

Runs the real proxy (1 worker, pinned to core 0) under ``perfkit run`` with
spans written to a JSONL file, drives it with non-streaming requests from
core 1 against the mock provider, and summarises ``perfkit.gc_pause_ms``
(docs/telemetry.md) over the chat requests: how many saw a pause, how long,
and how much of the slowest requests' time it was.

    python -m benchmarks.litellm_gc_pauses [--version 1.103.0] [--duration 20] [--warmup 5] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from litellm_perfkit._load import LoadPlan, Workload, run_load  # noqa: E402
from tests.support.litellm_env import VERSIONS  # noqa: E402
from tests.support.mock_server import mock_process  # noqa: E402
from tests.support.proxy import litellm_proxy, proxy_log  # noqa: E402

# The agent exports every half second here, so the spans are on disk while the
# proxy is still up, not only from its shutdown flush.
EXPORT_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "500"}


def server_attributes(jsonl: Path) -> list[dict[str, Any]]:
    rows = []
    for line in jsonl.read_bytes().splitlines():
        span = orjson.loads(line)
        if span.get("kind") not in (2, "SPAN_KIND_SERVER"):
            continue
        attributes = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
        if str(attributes.get("url.path", "")).endswith("/completions"):
            rows.append(attributes)
    return rows


def wait_for_spans(jsonl: Path, timeout_s: float = 30.0) -> None:
    """Until the file has stopped growing for two export intervals (or ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    size, still_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = jsonl.stat().st_size if jsonl.exists() else -1
        if now != size:
            size, still_since = now, time.monotonic()
        elif size > 0 and time.monotonic() - still_since > 1.0:
            return
        time.sleep(0.1)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=VERSIONS[-1], choices=VERSIONS)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load after the warm-up")
    parser.add_argument(
        "--warmup", type=float, default=5.0, help="seconds of load first (its requests are counted too)"
    )
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory() as tmp, mock_process("--chunks", "20") as upstream:
        jsonl = Path(tmp) / "spans.jsonl"
        exporter = ("--out", str(jsonl))
        with litellm_proxy(
            args.version, upstream, Path(tmp), mode="perfkit", perfkit_args=exporter, pin_cpu="0", env=EXPORT_ENV
        ) as url:
            load = run_load(
                Workload(url=url, prompt_repeats=150),
                LoadPlan(concurrency=args.concurrency, duration_s=args.duration, warmup_s=args.warmup, timeout_s=60),
                progress="off",
            )["summary"]
            wait_for_spans(jsonl)
        rows = server_attributes(jsonl) if jsonl.exists() else []
        if not rows:
            print(
                f"no chat request spans were written to {jsonl.name} "
                f"({load['requests']} requests, errors {load['errors_by_class']}); the proxy's log ends:\n"
                f"{proxy_log(Path(tmp))[-3000:]}",
                file=sys.stderr,
            )
            return 1
    pauses = [float(row.get("perfkit.gc_pause_ms", 0.0)) for row in rows]
    totals = [float(row["perfkit.total_ms"]) for row in rows]
    paused = [p for p in pauses if p > 0]
    slowest = sorted(range(len(rows)), key=lambda i: -totals[i])[: max(1, len(rows) // 20)]
    print(
        f"LiteLLM {args.version}, {args.concurrency} users, {load['rps']:.1f} req/s, {len(rows)} requests (warm-up included)"
    )
    print(f"requests with a pause inside them: {len(paused)}")
    if paused:
        print(f"their pause time, median / p95: {statistics.median(paused):.1f} / {quantile(paused, 0.95):.1f} ms")
        print(f"longest pause inside one request: {max(paused):.1f} ms")
    print(
        f"requests with >= 100 ms of pause: {sum(p >= 100 for p in pauses)} ({sum(p >= 100 for p in pauses) / len(rows):.1%})"
    )
    print(
        f"slowest 5%: median total {statistics.median(totals[i] for i in slowest):.0f} ms, "
        f"median pause {statistics.median(pauses[i] for i in slowest):.0f} ms"
    )
    print(f"pause time / summed request time: {sum(pauses) / sum(totals):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
