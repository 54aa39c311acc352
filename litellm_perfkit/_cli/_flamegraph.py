"""``perfkit flamegraph``: a py-spy flamegraph of a running proxy, or of a command."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._common import CliError, duration, positive_int, run_command

if TYPE_CHECKING:
    pass

HELP = "capture a flamegraph (py-spy) of a running proxy or of a command"
DESCRIPTION = """\
Samples the Python stacks of a process from outside with py-spy: the target
runs unmodified. Attach to a running LiteLLM proxy with --pid (add
--subprocesses to include its uvicorn workers), or launch a command after --.
Stops after --duration, when the target exits, or on Ctrl-C, and writes the
file: speedscope JSON (open it at https://www.speedscope.app or with the
speedscope npm package) or an SVG flamegraph. See docs/profiling.md.

Needs the right to ptrace the target: root, CAP_SYS_PTRACE, or
kernel.yama.ptrace_scope=0 for your own processes.

With --diff A B it records nothing: it compares two recordings (speedscope
files or folded stacks; several per side, comma-separated, for repeats) and
prints the frames whose self and total time grew or shrank, per request with
--requests, with their share of the difference and, with repeats, a 95%
interval; --out writes a speedscope file of what grew and what shrank, and
--folded the stacks with both sides' weights (for flamegraph.pl).

examples:
  perfkit flamegraph --pid 12345 --subprocesses --duration 30
  perfkit flamegraph --format svg --out proxy.svg -- litellm --config config.yaml
  perfkit flamegraph --diff main.speedscope.json branch.speedscope.json --requests 2400,2390 --out diff.speedscope.json
"""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "flamegraph", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pid", type=positive_int, help="attach to this running process")
    p.add_argument(
        "--duration", type=duration, help="how long to record: 30, 30s, 1m (default: until the target exits or Ctrl-C)"
    )
    p.add_argument("--rate", type=positive_int, default=100, help="samples per second (default: 100)")
    p.add_argument("--subprocesses", action="store_true", help="also sample child processes (the proxy's workers)")
    p.add_argument(
        "--idle", action="store_true", help="include threads that are waiting (I/O, locks, the idle event loop)"
    )
    p.add_argument("--native", action="store_true", help="include native (C/C++/Rust) frames")
    p.add_argument(
        "--nonblocking", action="store_true", help="do not pause the target to sample it (less intrusive, may misread)"
    )
    p.add_argument(
        "--format", choices=["speedscope", "svg"], default="speedscope", help="output format (default: speedscope)"
    )
    p.add_argument("--out", help="the file (default: flamegraph.speedscope.json or flamegraph.svg)")
    diff = p.add_argument_group("compare two recordings")
    diff.add_argument(
        "--diff",
        nargs=2,
        metavar=("A", "B"),
        help="the baseline and the other recording(s): files, or comma-separated files per side (repeats)",
    )
    diff.add_argument(
        "--requests",
        metavar="NA,NB",
        help="requests each side's recordings served (per recording with repeats: NA1;NA2,NB1;NB2): times per request",
    )
    diff.add_argument(
        "--folded", metavar="FILE", help="with --diff: also write the stacks with both sides' weights ('stack A B')"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then a command to launch and profile")
    p.set_defaults(run=run)


def _requests(text: str | None, sides: list[list[str]]) -> list[list[float | None]]:
    if text is None:
        return [[None] * len(files) for files in sides]
    try:
        parsed = [[float(n) for n in part.split(";")] for part in text.split(",")]
    except ValueError:
        raise CliError(f"--requests {text!r}: give NA,NB (numbers), or per recording NA1;NA2,NB1;NB2") from None
    if len(parsed) != 2 or any(len(p) not in (1, len(files)) or min(p) <= 0 for p, files in zip(parsed, sides)):
        raise CliError(f"--requests {text!r}: one positive count per side, or one per recording of that side")
    return [[p[0] / len(files)] * len(files) if len(p) == 1 else list(p) for p, files in zip(parsed, sides)]


def _diff(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .._profile._diff import DiffError, diff, load_recording, render_diff, write_diff

    sides = [[f for f in side.split(",") if f] for side in args.diff]
    counts = _requests(args.requests, sides)
    try:
        recordings = [
            [load_recording(Path(f), n, args.rate) for f, n in zip(files, ns)] for files, ns in zip(sides, counts)
        ]
    except DiffError as exc:
        raise CliError(str(exc)) from None
    deltas, whole_a, whole_b = diff(recordings[0], recordings[1])
    print(render_diff(deltas, whole_a, whole_b, "ms per request" if args.requests else "ms"))
    out = Path(args.out) if args.out else None
    write_diff(recordings[0], recordings[1], out, Path(args.folded) if args.folded else None)
    for written in (args.out, args.folded):
        if written:
            print(f"written: {written}")
    return 0


def run(args: argparse.Namespace) -> int:
    from .._profile import FlamegraphOptions, ProfileError, record

    def action() -> int:
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if args.diff:
            if args.pid is not None or command:
                raise CliError("--diff compares two recordings; it does not record (no --pid, no command)")
            return _diff(args)
        if args.requests or args.folded:
            raise CliError("--requests and --folded go with --diff A B")
        if (args.pid is None) == (not command):
            raise CliError("give either --pid PID or a command after -- (not both)")
        output = args.out or ("flamegraph.speedscope.json" if args.format == "speedscope" else "flamegraph.svg")
        options = FlamegraphOptions(
            output=output,
            format=args.format,
            duration_s=args.duration,
            rate=args.rate,
            subprocesses=args.subprocesses,
            idle=args.idle,
            native=args.native,
            nonblocking=args.nonblocking,
        )
        try:
            path = record(options, pid=args.pid, command=command or None)
        except ProfileError as exc:
            raise CliError(str(exc)) from None
        print(f"written: {path}")
        return 0

    return run_command("flamegraph", action)
