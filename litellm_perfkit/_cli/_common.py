"""What every sub-command shares: one-line errors, Ctrl-C, number parsing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

__all__ = ["CliError", "run_command", "non_negative", "positive_int", "fraction"]


class CliError(Exception):
    """A user error: printed as one line, exit code 2, no traceback."""


def run_command(name: str, action: Callable[[], int]) -> int:
    try:
        return action()
    except CliError as exc:
        print(f"perfkit {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"perfkit {name}: interrupted", file=sys.stderr)
        return 130


def _number(kind: type, check: Callable[[float], bool], what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not check(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value  # type: ignore[no-any-return]

    return parse


non_negative = _number(float, lambda v: v >= 0, "a number >= 0")
positive_int = _number(int, lambda v: v >= 1, "a whole number >= 1")
port_number = _number(int, lambda v: 0 <= v <= 65535, "a port number (0-65535; 0 = any free port)")
fraction = _number(float, lambda v: 0 <= v <= 1, "a fraction between 0 and 1")
