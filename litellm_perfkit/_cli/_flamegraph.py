"""``perfkit flamegraph``: a py-spy flamegraph of a running proxy, or of a command."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._common import CliError, duration, positive_int, run_command

if TYPE_CHECKING:
    from .._profile import FlamegraphOptions, ProfileError, record

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

examples:
  perfkit flamegraph --pid 12345 --subprocesses --duration 30
  perfkit flamegraph --format svg --out proxy.svg -- litellm --config config.yaml
"""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("flamegraph", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pid", type=positive_int, help="attach to this running process")
    p.add_argument("--duration", type=duration, help="how long to record: 30, 30s, 1m (default: until the target exits or Ctrl-C)")
    p.add_argument("--rate", type=positive_int, default=100, help="samples per second (default: 100)")
    p.add_argument("--subprocesses", action="store_true", help="also sample child processes (the proxy's workers)")
    p.add_argument("--idle", action="store_true", help="include threads that are waiting (I/O, locks, the idle event loop)")
    p.add_argument("--native", action="store_true", help="include native (C/C++/Rust) frames")
    p.add_argument("--nonblocking", action="store_true", help="do not pause the target to sample it (less intrusive, may misread)")
    p.add_argument("--format", choices=["speedscope", "svg"], default="speedscope", help="output format (default: speedscope)")
    p.add_argument("--out", help="the file (default: flamegraph.speedscope.json or flamegraph.svg)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then a command to launch and profile")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._profile import FlamegraphOptions, ProfileError, record

    def action() -> int:
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if (args.pid is None) == (not command):
            raise CliError("give either --pid PID or a command after -- (not both)")
        output = args.out or ("flamegraph.speedscope.json" if args.format == "speedscope" else "flamegraph.svg")
        options = FlamegraphOptions(
            output=output, format=args.format, duration_s=args.duration, rate=args.rate, subprocesses=args.subprocesses,
            idle=args.idle, native=args.native, nonblocking=args.nonblocking,
        )  # fmt: skip
        try:
            path = record(options, pid=args.pid, command=command or None)
        except ProfileError as exc:
            raise CliError(str(exc)) from None
        print(f"written: {path}")
        return 0

    return run_command("flamegraph", action)
