"""``perfkit flamegraph``: a py-spy flamegraph of a running proxy, or of a command."""

from __future__ import annotations

import argparse

from ..types import FlamegraphFormat
from ._common import CliError, choices, default, duration, outputs, positive_int, run_command

HELP = "capture a flamegraph (py-spy) of a running proxy or of a command"
DESCRIPTION = """\
Samples the Python stacks of a process from outside with py-spy: the target
runs unmodified. Attach to a running LiteLLM proxy with --pid (add
--subprocesses to include its uvicorn workers), or launch a command after --.
Stops after --duration, when the target exits, or on Ctrl-C, and writes the
file: speedscope JSON (open it at https://www.speedscope.app or with the
speedscope npm package) or an SVG flamegraph, as --format or the --out name
(.svg) says. See docs/profiling.md.

Needs the right to ptrace the target: root, CAP_SYS_PTRACE, or
kernel.yama.ptrace_scope=0 for your own processes.

With --diff A B it records nothing: it compares two recordings (speedscope
files or folded stacks; several per side, comma-separated, for repeats) and
prints the frames whose self and total time grew or shrank, per request with
--requests, with their share of the difference and, with repeats, a 95%
interval. --out writes a speedscope file of what grew and what shrank, or, for
a name ending .folded, the stacks with both sides' weights (for flamegraph.pl);
repeat --out for both.

examples:
  perfkit flamegraph --pid 12345 --subprocesses --duration 30
  perfkit flamegraph --format svg --out proxy.svg -- litellm --config config.yaml
  perfkit flamegraph --diff main.speedscope.json branch.speedscope.json --requests 2400,2390 \\
      --out diff.speedscope.json --out diff.folded
"""


DIFF_OUTPUTS = {".folded": "folded stacks"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .._profile import FlamegraphOptions

    sample_hz = default(FlamegraphOptions, "sample_hz")
    p.add_argument("--pid", type=positive_int, help="attach to this running process")
    p.add_argument(
        "--duration", type=duration, help="how long to record: 30, 30s, 1m (default: until the target exits or Ctrl-C)"
    )
    p.add_argument(
        "--sample-hz",
        type=positive_int,
        default=sample_hz,
        metavar="N",
        help=f"samples per second (default: {sample_hz}); with --diff, the rate folded stacks were recorded at",
    )
    p.add_argument("--subprocesses", action="store_true", help="also sample child processes (the proxy's workers)")
    p.add_argument(
        "--idle", action="store_true", help="include threads that are waiting (I/O, locks, the idle event loop)"
    )
    p.add_argument("--native", action="store_true", help="include native (C/C++/Rust) frames")
    p.add_argument(
        "--nonblocking", action="store_true", help="do not pause the target to sample it (less intrusive, may misread)"
    )
    p.add_argument(
        "--format",
        choices=choices(FlamegraphFormat),
        help="the recording's format (default: svg for an --out ending .svg, else speedscope)",
    )
    p.add_argument(
        "--out",
        action="append",
        metavar="FILE",
        help="the recording (default: flamegraph.speedscope.json or flamegraph.svg); with --diff, a speedscope "
        "file, or for FILE.folded the stacks with both sides' weights ('stack A B'): repeat for both",
    )
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
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then a command to launch and profile")


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

    outs = outputs(args.out, DIFF_OUTPUTS, "speedscope diff")
    sides = [[f for f in side.split(",") if f] for side in args.diff]
    counts = _requests(args.requests, sides)
    try:
        recordings = [
            [load_recording(Path(f), n, args.sample_hz) for f, n in zip(files, ns)] for files, ns in zip(sides, counts)
        ]
    except DiffError as exc:
        raise CliError(str(exc)) from None
    deltas, whole_a, whole_b = diff(recordings[0], recordings[1])
    print(render_diff(deltas, whole_a, whole_b, "ms per request" if args.requests else "ms"))
    speedscope, folded = outs.get("speedscope diff"), outs.get("folded stacks")
    write_diff(recordings[0], recordings[1], Path(speedscope) if speedscope else None, Path(folded) if folded else None)
    for written in outs.values():
        print(f"written: {written}")
    return 0


def run(args: argparse.Namespace) -> int:
    from .._profile import FlamegraphOptions, ProfileError, record

    def action() -> int:
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if args.diff:
            if args.pid is not None or command or args.format:
                raise CliError(
                    "--diff compares two recordings; it does not record (no --pid, no command, no --format: "
                    "each --out's name says its kind)"
                )
            return _diff(args)
        if args.requests:
            raise CliError("--requests goes with --diff A B")
        if (args.pid is None) == (not command):
            raise CliError("give either --pid PID or a command after -- (not both)")
        if args.out and len(args.out) > 1:
            raise CliError(f"one recording, one --out: {' and '.join(args.out)} are several")
        output = args.out[0] if args.out else None
        svg = args.format == "svg" or (args.format is None and output is not None and output.lower().endswith(".svg"))
        output = output or ("flamegraph.svg" if svg else "flamegraph.speedscope.json")
        options = FlamegraphOptions(
            output=output,
            format="svg" if svg else "speedscope",
            duration_s=args.duration,
            sample_hz=args.sample_hz,
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
