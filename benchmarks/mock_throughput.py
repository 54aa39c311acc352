"""How fast the mock provider is, on one core, so it never limits a benchmark.

The mock runs pinned to core 0 (``taskset -c 0``); the load runs on core 1.

1. non-streaming chat completions, req/s, by wrk (Debian package);
2. 20-chunk streams, streams/s, by wrk (each request reads a whole stream);
3. a configured TTFT of 50 ms (ITL 10 ms, 20 chunks) with 500 concurrent
   streams in a closed loop: p50 of the mock's own stamps (first content
   chunk sent minus request received), from an asyncio client. Targets: >= 15,000 req/s, >= 3,000 streams/s, 50 +- 1 ms.

    python -m benchmarks.mock_throughput [--duration 10] [--repeats 3]

perfkit's own load driver against the same mock: ``benchmarks.driver_throughput``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.mock_server import mock_process  # noqa: E402

BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hello " * 20}]})
STREAM_BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hello " * 20}], "stream": True})


@contextmanager
def mock(*flags: str) -> Iterator[str]:
    """The mock, pinned to core 0."""
    with mock_process(*flags, pin_cpu="0") as url:
        yield url


def wrk(url: str, body: bytes, duration: int, connections: int) -> float:
    """Requests per second reported by wrk (one thread, on core 1)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(
            f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[{body.decode()}]]\n'
        )
    try:
        out = subprocess.run(
            [
                "taskset",
                "-c",
                "1",
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{duration}s",
                "-s",
                script.name,
                f"{url}/v1/chat/completions",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        os.unlink(script.name)
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert match, out
    return float(match.group(1))


async def one_stream(host: str, port: int) -> float:
    """The mock's own TTFT for one stream: first content stamp minus receive stamp, ms."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(STREAM_BODY), STREAM_BODY)
    )
    data = await reader.read(-1)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    received = int(re.search(rb"x-perfkit-mock-received-ns: (\d+)", head).group(1))  # type: ignore[union-attr]
    for line in body.split(b"\n"):
        if line.startswith(b"data: {") and b'"content":"tok"' in line:
            return (orjson.loads(line[6:])["perfkit"]["mono_ns"] - received) / 1e6
    raise RuntimeError("no content chunk in the stream")


async def ttft_under_load(
    url: str, concurrency: int, seconds: float, warmup_s: float = 1.0
) -> tuple[float, float, int]:
    """Closed loop: ``concurrency`` clients, each streaming again as soon as one ends.
    Returns the p50 and p99 of the mock's own TTFT after the warm-up, and the count."""
    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    results: list[float] = []

    async def client() -> None:
        while time.monotonic() - started < seconds:
            ttft = await one_stream(host, int(port))
            if time.monotonic() - started > warmup_s:
                results.append(ttft)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    ordered = sorted(results)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99) - 1], len(ordered)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        print("needs wrk and taskset: apt-get install wrk util-linux", file=sys.stderr)
        return 2
    plain, streams, ttft_p50, ttft_p99, counts = [], [], [], [], []
    for _ in range(args.repeats):
        with mock() as url:
            wrk(url, BODY, 2, 64)  # warm-up
            plain.append(wrk(url, BODY, args.duration, 64))
        with mock("--chunks", "20") as url:
            wrk(url, STREAM_BODY, 2, 64)
            streams.append(wrk(url, STREAM_BODY, args.duration, 64))
        with mock("--ttft-ms", "50", "--itl-ms", "10", "--chunks", "20") as url:
            p50, p99, count = asyncio.run(ttft_under_load(url, 500, seconds=args.duration))
            ttft_p50.append(p50)
            ttft_p99.append(p99)
            counts.append(count)
    print(
        f"\nmock on one core (taskset -c 0), load on the other; {args.repeats} repeats of {args.duration} s; medians\n"
    )
    print("| measurement | tool | result | target |")
    print("|---|---|---:|---:|")
    print(f"| non-streaming chat completions | wrk -c64 | {statistics.median(plain):,.0f} req/s | >= 15,000 |")
    print(f"| 20-chunk streams | wrk -c64 | {statistics.median(streams):,.0f} streams/s | >= 3,000 |")
    print(
        f"| TTFT configured 50 ms (ITL 10 ms, 20 chunks), 500 concurrent streams, closed loop, p50 of the mock's stamps "
        f"| asyncio client | {statistics.median(ttft_p50):.2f} ms (p99 {statistics.median(ttft_p99):.2f}; {statistics.median(counts):,.0f} streams) | 50 +- 1 ms |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
