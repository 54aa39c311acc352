"""Load-generator speed: perfkit load vs wrk vs Locust FastHttpUser (plain, and
perfkit's Locust user via ``perfkit load --driver locust``), per core.

One mock provider (``perfkit mock``) runs pinned to core 0; each tool in turn
runs pinned to core 1 against it, non-streaming chat completions, 64
connections, small bodies, for ``--duration`` seconds. Tools are interleaved
over ``--repeats``; the table shows medians and ratios.

wrk may be limited by the mock (one core of Python) rather than by itself, so
"x wrk" is a lower bound on how close perfkit comes to wrk.

    python -m benchmarks.driver_throughput [--duration 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.mock_throughput import mock, wrk  # noqa: E402

BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
LOCUSTFILE = """
from locust import FastHttpUser, constant, task

class Chat(FastHttpUser):
    wait_time = constant(0)

    @task
    def chat(self):
        self.client.post("/v1/chat/completions", json={body})
"""


def _python_on_tool_core(module_and_args: list[str], cwd: str | None = None) -> None:
    """``python -m MODULE ARGS`` pinned to core 1 (the mock has core 0); raises if it fails."""
    command = ["taskset", "-c", "1", sys.executable, "-m", *module_and_args]
    subprocess.run(command, check=True, capture_output=True, cwd=cwd)


def perfkit(url: str, duration: int, driver: str = "perfkit") -> float:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    try:
        _python_on_tool_core(
            [
                "litellm_perfkit._cli",
                "load",
                "--url",
                url,
                "--concurrency",
                "64",
                "--duration",
                str(duration),
                "--prompt-repeats",
                "1",
                "--model",
                "m",
                "--progress",
                "off",
                "--out",
                path,
                "--driver",
                driver,
            ]
        )
        result = json.loads(Path(path).read_text())
    finally:
        os.unlink(path)
    if result["summary"]["errors"]:
        raise RuntimeError(f"perfkit load saw errors: {result['summary']['errors_by_class']}")
    return float(result["summary"]["rps"])


def locust(url: str, duration: int) -> float:
    with tempfile.TemporaryDirectory() as workdir:
        locustfile = Path(workdir) / "locustfile.py"
        locustfile.write_text(LOCUSTFILE.format(body=json.dumps(BODY)))
        _python_on_tool_core(
            [
                "locust",
                "-f",
                str(locustfile),
                "--headless",
                "-u",
                "64",
                "-r",
                "64",
                "-t",
                f"{duration}s",
                "--host",
                url,
                "--csv",
                f"{workdir}/stats",
                "--only-summary",
                "--loglevel",
                "ERROR",
            ],
            cwd=workdir,
        )
        stats = Path(f"{workdir}/stats_stats.csv").read_text().splitlines()
    header = stats[0].split(",")
    row = next(line.split(",") for line in stats[1:] if line.split(",")[1] == '"Aggregated"' or "Aggregated" in line)
    requests = int(row[header.index("Request Count")])
    failures = int(row[header.index("Failure Count")])
    if failures:
        raise RuntimeError(f"locust saw {failures} failures")
    if not requests:
        raise RuntimeError(f"locust made no request in {duration} s (it needs about a second to start its users)")
    # Locust's own "Requests/s" averages over the whole run including ramp-up.
    return requests / duration


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for tool in ("wrk", "taskset"):
        if shutil.which(tool) is None:
            print(f"needs {tool} (apt-get install wrk util-linux)", file=sys.stderr)
            return 2
    body = json.dumps(BODY).encode()
    results: dict[str, list[float]] = {
        "wrk": [],
        "perfkit load": [],
        "locust FastHttpUser": [],
        "locust + perfkit user": [],
    }
    with mock() as url:
        wrk(url, body, 2, 64)  # warm-up
        for _ in range(args.repeats):
            results["wrk"].append(wrk(url, body, args.duration, 64))
            results["perfkit load"].append(perfkit(url, args.duration))
            results["locust FastHttpUser"].append(locust(url, args.duration))
            results["locust + perfkit user"].append(perfkit(url, args.duration, driver="locust"))
            print({k: v[-1] for k, v in results.items()}, file=sys.stderr)
    medians = {k: statistics.median(v) for k, v in results.items()}
    print(f"\none mock on core 0; each tool on core 1; 64 connections; {args.repeats} x {args.duration} s; medians\n")
    print("| tool | req/s | perfkit / tool |")
    print("|---|---:|---:|")
    for tool, rps in medians.items():
        ratio = medians["perfkit load"] / rps
        print(f"| {tool} | {rps:,.0f} | {ratio:.2f}x |")
    print(
        f"\nTargets: perfkit >= 0.4x wrk (here {medians['perfkit load'] / medians['wrk']:.2f}x), "
        f">= 2x Locust FastHttpUser (here {medians['perfkit load'] / medians['locust FastHttpUser']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
