"""``perfkit``: one entry point, one sub-command per job."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from .._version import __version__
from . import _bench, _bisect, _compare, _flamegraph, _load, _mock, _report, _run, _schema
from ._common import RENAMED

__all__ = ["main", "build_parser"]

DESCRIPTION = """\
Where an LLM gateway's milliseconds go: per-stage timings inside the gateway,
a mock provider with known timing, load and benchmarks.

Run `perfkit COMMAND --help` for the options of each command."""


class _Parser(argparse.ArgumentParser):
    """A bad flag is one line and exit code 2, with a pointer to --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        # A renamed flag is named before argparse complains about anything
        # else (a required flag it replaced, say). Arguments after -- belong
        # to the command perfkit runs.
        words = list(sys.argv[1:] if args is None else args)
        for word in words[: words.index("--")] if "--" in words else words:
            old = word.split("=", 1)[0]
            if old in RENAMED:
                self.error(f"{old} is now {RENAMED[old]}")
        return super().parse_known_args(args, namespace)


def _request_path() -> str:
    from .._core._backend import ACTIVE, speedups_mode

    if ACTIVE.name == "c":
        return "C accelerator"
    return (
        "pure Python, PERFKIT_SPEEDUPS=off"
        if speedups_mode() == "off"
        else "pure Python, the C accelerator is not built"
    )


class _Version(argparse.Action):
    """--version, with the request path found only when asked (it loads the recorder)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        print(f"perfkit {__version__} (request path: {_request_path()})")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="perfkit", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the version and which request path runs here, and exit"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _bench.add_parser(subparsers)
    _compare.add_parser(subparsers)
    _bisect.add_parser(subparsers)
    _report.add_parser(subparsers)
    _mock.add_parser(subparsers)
    _load.add_parser(subparsers)
    _run.add_parser(subparsers)
    _flamegraph.add_parser(subparsers)
    _schema.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
