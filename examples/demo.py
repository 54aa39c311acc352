"""perfkit in one minute: a mock provider, an instrumented gateway, load.

1. starts the mock provider (TTFT 30 ms, 20 chunks 5 ms apart);
2. starts examples/gateway.py in front of it, instrumented with perfkit;
3. drives streaming load straight at the mock, then through the gateway;
4. prints what the gateway added, and where its time went by stage.

    python examples/demo.py [--duration 5] [--concurrency 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from litellm_perfkit._load import LoadPlan, Workload, render_table, run_load

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def process(command: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[None]:
    log = tempfile.TemporaryFile()
    child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if child.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    sys.exit(f"demo: {command[2:4]} did not start:\n{log.read().decode()[-2000:]}")
                time.sleep(0.1)
        yield
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args()
    mock_port, gateway_port = free_port(), free_port()
    spans = Path(tempfile.mkdtemp()) / "spans.jsonl"
    mock = [sys.executable, "-m", "litellm_perfkit._cli", "mock", "--port", str(mock_port), "--ttft-ms", "30", "--itl-ms", "5"]
    gateway = [sys.executable, "-m", "uvicorn", "examples.gateway:app", "--port", str(gateway_port), "--log-level", "warning"]
    gateway_env = {"UPSTREAM": f"http://127.0.0.1:{mock_port}", "OTEL_TRACES_EXPORTER": "jsonl", "PERFKIT_JSONL_PATH": str(spans)}
    plan = LoadPlan(concurrency=args.concurrency, duration_s=args.duration, warmup_s=1.0)
    results = {}
    with process(mock, mock_port), process(gateway, gateway_port, gateway_env):
        for name, port in (("direct to the mock", mock_port), ("through the gateway", gateway_port)):
            print(f"\n== {name} ({args.duration:g} s, {args.concurrency} streams at a time)")
            result = run_load(Workload(url=f"http://127.0.0.1:{port}", stream=True), plan)
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
