"""perfkit in one minute: a mock provider, an instrumented gateway, load.

1. starts the mock provider (TTFT 30 ms, 20 chunks 5 ms apart);
2. starts examples/gateway.py in front of it, instrumented with perfkit;
3. drives streaming load straight at the mock, then through the gateway;
4. prints what the gateway added, and where its time went by stage.

    python examples/demo.py [--duration 5] [--concurrency 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from litellm_perfkit._bench._launch import Children, free_port, port_open, start_mock
from litellm_perfkit._load import LoadPlan, Workload, render_table, run_load

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args()
    spans = Path(tempfile.mkdtemp()) / "spans.jsonl"
    plan = LoadPlan(concurrency=args.concurrency, duration_s=args.duration, warmup_s=1.0)
    results = {}
    with Children() as children:
        mock = start_mock(children, "--ttft-ms", "30", "--itl-ms", "5")
        port = free_port()
        gateway = [
            sys.executable,
            "-m",
            "uvicorn",
            "examples.gateway:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        env = {**os.environ, "UPSTREAM": mock, "OTEL_TRACES_EXPORTER": "jsonl", "PERFKIT_JSONL_PATH": str(spans)}
        children.start("gateway", gateway, env, ROOT).wait_ready(lambda: port_open(port), timeout_s=30)
        for name, url in (("direct to the mock", mock), ("through the gateway", f"http://127.0.0.1:{port}")):
            print(f"\n== {name} ({args.duration:g} s, {args.concurrency} streams at a time)")
            result = run_load(Workload(url=url, stream=True), plan)
            print(render_table(result))
            results[name] = result["summary"]
    direct, proxied = results["direct to the mock"], results["through the gateway"]
    print("\n== what the gateway added (p50)")
    for key, label in (("ttft_ms", "TTFT"), ("e2e_ms", "full stream")):
        print(f"{label:12} {proxied[key]['p50'] - direct[key]['p50']:+.2f} ms")
    print(f"throughput   {proxied['rps']:.0f} vs {direct['rps']:.0f} streams/s")
    print(f"\nspans of every gateway request (OTLP/JSON, one per line): {spans}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
