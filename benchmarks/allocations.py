"""Python allocations per request, recorded and not: the request path, the
export thread and the export agent.

Each variant of ``benchmarks.middleware_overhead`` (the same in-process
Starlette app, a JSON response and a 20-chunk SSE stream, 4 stages) runs
under valgrind's callgrind twice, with N and 4N requests, its spans exported
to a local Jaeger and flushed before exit; the difference of the counts over
3N is per request, start-up cancelled out. Two counts:

- **objects**: calls of CPython's small-object allocator (``_PyObject_Malloc``
  and ``_PyObject_Calloc``): nearly every Python object, plus small buffers
  (a dict's keys, a list's items);
- **gc-tracked**: calls of ``_PyObject_GC_Link``, the objects the cyclic
  collector tracks. Generation 0's count grows by these, so they are what
  triggers collections.

Counted per thread of the app process (``--separate-threads``): the main
thread is the request path; the others are the export thread. The export
agent, a child process, is counted too (``--trace-children``). CPython
3.11's allocator, as this venv's interpreter; deterministic (fixed hash seed,
no address randomization), so it resolves what timings cannot.

    python -m benchmarks.allocations [--requests 100] [--variants passthrough-tallied,...] [--workloads json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.middleware_overhead import VARIANTS, WORKLOADS, counted_child
from tests.support.servers import jaeger_process

OBJECT_ALLOCATORS = ("_PyObject_Malloc", "_PyObject_Calloc")
GC_TRACKED = "_PyObject_GC_Link"
DEFAULT_VARIANTS = ["bare", "passthrough-tallied", "perfkit-noexport", "perfkit-process", "perfkit-process-py"]
WHERE = ("request path", "export thread", "export agent")


@dataclass(frozen=True)
class Counts:
    objects: int
    gc_tracked: int


def calls_by_function(path: Path) -> Counter[str]:
    """Calls into each function in one callgrind output file (strings uncompressed);
    a function's recursion cycles (``name'2``) count as the function."""
    calls: Counter[str] = Counter()
    callee = None
    with path.open() as lines:
        for line in lines:
            if line.startswith("cfn="):
                callee = line[4:].strip().split("'", 1)[0]
            elif line.startswith("calls=") and callee is not None:
                calls[callee] += int(line[6:].split(maxsplit=1)[0])
    return calls


def allocations_by_callers(path: Path) -> Counter[str]:
    """Calls of the small-object allocator by who called it, in a callgrind output made with
    ``--separate-callers=N`` (a function's name then carries its N callers: ``f'caller'caller2``)."""
    chains: Counter[str] = Counter()
    callee = None
    with path.open() as lines:
        for line in lines:
            if line.startswith("cfn="):
                callee = line[4:].strip()
            elif line.startswith("calls=") and callee is not None:
                name, _, callers = callee.partition("'")
                if name in OBJECT_ALLOCATORS:
                    chains[callers] += int(line[6:].split(maxsplit=1)[0])
    return chains


def counts(calls: Counter[str]) -> Counts:
    return Counts(sum(calls[name] for name in OBJECT_ALLOCATORS), calls[GC_TRACKED])


def _command_of(path: Path) -> str:
    with path.open() as lines:
        return next((line[5:].strip() for line in lines if line.startswith("cmd: ")), "")


def run_counted(variant: str, path: str, n: int, endpoint: str) -> dict[str, Counts]:
    """One child run under callgrind: counts by where they happened (``WHERE``)."""
    with tempfile.TemporaryDirectory() as out:
        tool = [
            "--tool=callgrind",
            "--compress-strings=no",
            "--compress-pos=no",
            "--separate-threads=yes",
            "--trace-children=yes",
            f"--callgrind-out-file={out}/cg.%p",
        ]
        result = counted_child(tool, variant, path, n, endpoint)
        if result.returncode != 0:
            raise RuntimeError(f"callgrind run of {variant} {path} failed: {result.stderr.strip()[-500:]}")
        by_where = {where: Counter[str]() for where in WHERE}
        for file in Path(out).glob("cg.*"):
            command_line = _command_of(file)
            if "_export._agent" in command_line:
                by_where["export agent"] += calls_by_function(file)
            elif "middleware_overhead" in command_line:
                main_thread = file.name.endswith("-01")
                by_where["request path" if main_thread else "export thread"] += calls_by_function(file)
        return {where: counts(calls) for where, calls in by_where.items()}


def per_request(
    endpoint: str, requests: int, names: list[str], workloads: list[str]
) -> dict[tuple[str, str, str], Counts]:
    """(workload, variant, where) -> allocations per request: (C(4N) - C(N)) / 3N."""
    jobs = [
        (w, v, path, max(1, requests // (2 if w == "sse-20" else 1)))
        for w, path in WORKLOADS
        if w in workloads
        for v in names
    ]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # deterministic counts: parallel runs do not disturb them
        low = {(w, v): pool.submit(run_counted, v, path, n, endpoint) for w, v, path, n in jobs}
        high = {(w, v): pool.submit(run_counted, v, path, 4 * n, endpoint) for w, v, path, n in jobs}
        table = {}
        for w, v, _, n in jobs:
            small, large = low[(w, v)].result(), high[(w, v)].result()
            for where in WHERE:
                table[(w, v, where)] = Counts(
                    round((large[where].objects - small[where].objects) / (3 * n)),
                    round((large[where].gc_tracked - small[where].gc_tracked) / (3 * n)),
                )
        return table


def print_table(
    table: dict[tuple[str, str, str], Counts], names: list[str], workloads: list[str], requests: int
) -> None:
    print(
        f"\nallocations per request (valgrind callgrind, (4N - N) / 3N, N = {requests}; "
        f"python {sys.version.split()[0]}): objects (gc-tracked), added over bare\n"
    )
    print("| workload | variant | request path | export thread | export agent | request path, added |")
    print("|---|---|---:|---:|---:|---:|")
    for workload in workloads:
        bare = table[(workload, "bare", "request path")]
        for variant in names:
            cells = [table[(workload, variant, where)] for where in WHERE]
            path = cells[0]
            added = f"{path.objects - bare.objects:+,} ({path.gc_tracked - bare.gc_tracked:+,})"
            shown = " | ".join(f"{c.objects:,} ({c.gc_tracked:,})" for c in cells)
            print(f"| {workload} | {variant} | {shown} | {added} |")


def main() -> int:
    os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")  # Jaeger takes traces only
    os.environ.setdefault("PERFKIT_RECORD_RATE", "all")  # the recorded variants record every request
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100, help="N (default 100; streams N/2)")
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS[1:]),
        help=f"a comma-separated subset of middleware_overhead's variants (bare is always run; default: "
        f"{','.join(DEFAULT_VARIANTS[1:])})",
    )
    parser.add_argument(
        "--workloads",
        default="json,sse-20",
        help="a comma-separated subset of json,sse-20 (default: both)",
    )
    args = parser.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    known = [w for w, _ in WORKLOADS]
    if not workloads or set(workloads) - set(known):
        print(f"error: --workloads takes a comma-separated subset of {','.join(known)}", file=sys.stderr)
        return 2
    names = ["bare"] + [name for name in args.variants.split(",") if name and name != "bare"]
    unknown = sorted(set(names) - set(VARIANTS) | ({"perfkit-sdk"} & set(names)))
    if unknown:
        choices = ", ".join(v for v in VARIANTS if v != "perfkit-sdk")
        print(f"error: variant(s) {', '.join(unknown)} cannot be counted; choose from {choices}", file=sys.stderr)
        return 2
    if args.requests < 1:
        print("error: --requests must be at least 1", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None or shutil.which("setarch") is None:
        print("error: needs valgrind and setarch on PATH (apt-get install valgrind util-linux)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as workdir, jaeger_process(Path(workdir)) as jaeger:
        table = per_request(jaeger.otlp_http, args.requests, names, workloads)
        print_table(table, names, workloads, args.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
