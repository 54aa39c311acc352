"""SIGTERM at random moments of ``perfkit bench``: how long until no process it started is left.

Each moment starts a fresh ``perfkit bench`` on the real LiteLLM proxy (a
cached venv per version), waits for one of its stages (start-up, each direct
phase, the proxy's start-up, each proxy phase, the idle phase and the stop
after it) plus a random offset into it, and sends SIGTERM to it alone, as a
shell script's ``kill`` does. It prints, per moment, the exit code, the
seconds to its exit and to the end of the last process it started (mock,
proxy, workers, export agents; zombies count as left), and the maximum::

    PERFKIT_CACHE_DIR=... python -m benchmarks.bench_sigterm --moments 30 --version 1.103.0

Exit code 1 when a moment left a process past ``--limit`` (10 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.stop_probe import Stop, bench_command, moments, stop_at  # noqa: E402


def line(index: int, stop: Stop) -> str:
    if not stop.reached:
        return f"{index:3d} {stop.moment!s:42} not reached (the bench ended first)"
    clean = f"{stop.clean_s:5.1f}" if stop.clean_s is not None else "  >lim"
    exit_s = f"{stop.exit_s:5.1f}" if stop.exit_s is not None else "  >lim"
    return f"{index:3d} {stop.moment!s:42} exit {stop.exit_code!s:>4} in {exit_s} s, clean in {clean} s, {stop.seen} started, left {len(stop.left)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moments", type=int, default=30)
    parser.add_argument("--version", default="1.103.0")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--limit", type=float, default=10.0, help="seconds every process has to be gone in")
    args = parser.parse_args()
    worst: list[float] = []
    failed = reached = 0
    with tempfile.TemporaryDirectory(prefix="perfkit-sigterm-") as tmp:
        for index, moment in enumerate(moments(args.moments, args.seed)):
            work = Path(tmp) / str(index)
            work.mkdir()
            stop = stop_at(bench_command(args.version, work / "bench.json"), moment, work / "bench.log", cwd=work)
            print(line(index, stop), flush=True)
            if not stop.reached:
                continue
            reached += 1
            if stop.clean_s is not None:
                worst.append(stop.clean_s)
            if not stop.clean_within(args.limit):
                failed += 1
                print("    left: " + "\n          ".join(stop.left or ["-"]), flush=True)
                print("    log: " + stop.log_tail[-1200:].replace("\n", "\n         "), flush=True)
    print(
        f"\n{args.moments} moments, {reached} reached; max time to clean {max(worst, default=0):.1f} s; "
        f"{failed} over {args.limit:g} s or with a process left",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
