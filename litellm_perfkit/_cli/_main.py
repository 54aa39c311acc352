"""``perfkit``: one entry point, one sub-command per job."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from .._version import __version__
from . import _bench, _bisect, _compare, _flamegraph, _load, _mock, _report, _run, _schema

__all__ = ["main", "build_parser", "command_parsers"]

# Each command's module: HELP, DESCRIPTION, add_arguments(parser), run(args).
COMMANDS = {
    "bench": _bench,
    "compare": _compare,
    "bisect": _bisect,
    "report": _report,
    "mock": _mock,
    "load": _load,
    "run": _run,
    "flamegraph": _flamegraph,
    "schema": _schema,
}

DESCRIPTION = """\
Where an LLM gateway's milliseconds go: per-stage timings inside the gateway,
a mock provider with known timing, load and benchmarks.

Run `perfkit COMMAND --help` for the options of each command."""


class _Parser(argparse.ArgumentParser):
    """A bad flag is one line and exit code 2, with a pointer to --help. Flags
    are spelled out: an abbreviation could pick another flag (--api-key would
    be taken for --api-key-file, and the key shown in the error as a path)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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


def _add_flags(name: str, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    if parser.get_default("run") is None:
        COMMANDS[name].add_arguments(parser)
        parser.set_defaults(run=COMMANDS[name].run)
    return parser


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """A command's flags are added when it is chosen: their defaults come from
    the options they fill, whose modules another command need not load."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        _add_flags(values[0], self._name_parser_map[values[0]])
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="perfkit", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the version and which request path runs here, and exit"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser, action=_Commands)
    for name, module in COMMANDS.items():
        subparsers.add_parser(
            name,
            help=module.HELP,
            description=module.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    return parser


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser with its flags (for what inspects them all: the tests)."""
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: _add_flags(name, parser) for name, parser in subparsers.choices.items()}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
