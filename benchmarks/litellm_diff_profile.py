"""Where perfkit's cost on the LiteLLM proxy goes: a differential profile.

The same proxy (1 worker pinned to core 0, ``--exporter none``: no export
agent) plain and under ``perfkit run``, in interleaved pairs; each side is
warmed up, then recorded by py-spy (non-blocking, 250 Hz) for ``--duration``
seconds under 32 users of JSON requests. ``perfkit flamegraph --diff``
then compares the recordings per request, and this script adds the same
difference grouped by where the sampled frame's code lives (perfkit, each
LiteLLM module, each other package): perfkit's own frames against the rest.

    python -m benchmarks.litellm_diff_profile [--version 1.103.0] [--repeats 3] [--duration 15] [--warmup 8] [--record-ratio 1]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from litellm_perfkit._load import LoadPlan, Workload, run_load  # noqa: E402
from tests.support.litellm_env import VERSIONS  # noqa: E402
from tests.support.mock_server import mock_process  # noqa: E402
from tests.support.proxy import litellm_proxy  # noqa: E402

PY_SPY = Path(sys.executable).with_name("py-spy")
RATE = 250


def _record(pid: int, seconds: float, out: Path, spent: dict[str, float]) -> None:
    started = time.monotonic()
    subprocess.run(
        [
            str(PY_SPY),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            str(RATE),
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        capture_output=True,
        check=True,
    )
    spent["s"] = time.monotonic() - started


def _group(leaf: str) -> str:
    """Where a frame's code lives: perfkit, a LiteLLM module, or another package."""
    match = re.search(r"\(([^:)]+)", leaf)
    path = match.group(1) if match else leaf
    if "litellm_perfkit" in path:
        return "perfkit"
    if path.startswith("litellm/"):
        return "litellm/" + path.split("/")[1]
    if "<frozen" in path:
        return "importlib"
    return path.split("/")[0]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=VERSIONS[-1], choices=VERSIONS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds py-spy records each side")
    parser.add_argument(
        "--warmup", type=float, default=8.0, help="seconds of load on each fresh proxy before recording"
    )
    parser.add_argument(
        "--record-ratio",
        default="1",
        help="PERFKIT_RECORD_RATIO of the perfkit side (0: its middleware passes every request through)",
    )
    parser.add_argument("--out", type=Path, help="keep the recordings here (default: a temporary directory)")
    return parser


def _record_sides(args: argparse.Namespace, upstream: str, tmp: Path, out: Path) -> dict[str, list[int]]:
    """Each side's py-spy recordings, in interleaved fresh proxies; per side and
    recording, the requests served while it recorded."""
    served: dict[str, list[int]] = {"plain": [], "perfkit": []}
    for repeat in range(args.repeats):
        for mode in ("plain", "perfkit") if repeat % 2 == 0 else ("perfkit", "plain"):
            pids: list[int] = []
            env = {"PERFKIT_RECORD_RATIO": args.record_ratio} if mode == "perfkit" else {}
            with litellm_proxy(
                args.version,
                upstream,
                tmp,
                mode=mode,
                perfkit_args=("--exporter", "none"),
                pin_cpu="0",
                env=env,
                pids=pids,
            ) as url:
                workload = Workload(url=url, stream=False, prompt_repeats=150)
                run_load(
                    workload,
                    LoadPlan(concurrency=32, duration_s=args.warmup, warmup_s=0, timeout_s=60),
                    progress="off",
                )
                spent: dict[str, float] = {}
                recorder = threading.Timer(2, _record, (pids[0], args.duration, out / f"{mode}-{repeat}.txt", spent))
                recorder.start()
                summary = run_load(
                    workload,
                    LoadPlan(concurrency=32, duration_s=args.duration + 5, warmup_s=0, timeout_s=60),
                    progress="off",
                )["summary"]
                recorder.join()
                served[mode].append(int(summary["rps"] * spent["s"]))
                print(
                    f"repeat {repeat + 1} {mode}: {summary['rps']:.1f} req/s, {served[mode][-1]} requests recorded",
                    file=sys.stderr,
                )
    return served


def _print_diff(args: argparse.Namespace, out: Path, served: dict[str, list[int]]) -> None:
    """perfkit flamegraph --diff of the two sides, and its self time per request by where the code lives."""
    sides = [",".join(str(out / f"{mode}-{r}.txt") for r in range(args.repeats)) for mode in ("plain", "perfkit")]
    requests = ",".join(";".join(map(str, served[mode])) for mode in ("plain", "perfkit"))
    folded = out / "diff.folded"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "litellm_perfkit._cli",
            "flamegraph",
            "--diff",
            *sides,
            "--requests",
            requests,
            "--sample-hz",
            str(RATE),
            "--out",
            str(folded),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    print(
        f"\nLiteLLM {args.version}, 1 worker on core 0, --exporter none, record ratio {args.record_ratio}; py-spy {RATE} Hz, "
        f"{args.repeats} interleaved recordings of {args.duration:g} s per side, 32 users, JSON\n"
    )
    print("\n".join(result.stdout.splitlines()[:25]))
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for line in folded.read_text(errors="replace").splitlines():
        stack, a, b = line.rsplit(" ", 2)
        group = groups[_group(stack.split(";")[-1])]
        group[0] += float(a)
        group[1] += float(b)
    rows = sorted(groups.items(), key=lambda item: item[1][0] - item[1][1])
    print(
        "\nself time per request by where the code lives (ms):\n\n| code | plain | perfkit | change |\n|---|---:|---:|---:|"
    )
    for name, (a, b) in rows[:12]:
        print(f"| {name} | {a:.3f} | {b:.3f} | {b - a:+.3f} |")
    total_a, total_b = sum(a for a, _ in groups.values()), sum(b for _, b in groups.values())
    print(f"| all | {total_a:.3f} | {total_b:.3f} | {total_b - total_a:+.3f} |")


def main() -> int:
    args = _parser().parse_args()
    os.sched_setaffinity(0, {1})  # the driver and the mock on core 1, the proxy on core 0
    with tempfile.TemporaryDirectory() as tmp, mock_process("--chunks", "20") as upstream:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        served = _record_sides(args, upstream, Path(tmp), out)
        _print_diff(args, out, served)
    return 0


if __name__ == "__main__":
    sys.exit(main())
