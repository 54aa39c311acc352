"""``perfkit``: one entry point, one sub-command per job."""

from __future__ import annotations

import argparse
import sys

from .._version import __version__

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfkit",
        description="Where an LLM gateway's milliseconds go: per-stage timings, a mock provider, load and benchmarks.",
    )
    parser.add_argument("--version", action="version", version=f"perfkit {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
