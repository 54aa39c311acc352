"""What every sub-command shares: one-line errors, Ctrl-C, number parsing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .._stop import exit_code, signal_name, stop_signals
from .._wire._record_rate import parse_record_rate

__all__ = [
    "CliError",
    "EXTRAS",
    "RENAMED",
    "needs_extra",
    "duration",
    "fraction",
    "non_negative",
    "positive_int",
    "record_rate",
    "run_command",
    "warmup",
]

RENAMED = {
    "--jsonl": "--records-out (perfkit load: one line per request) or --spans-out (perfkit run: spans)",
    "--html": "--out",
    "--output": "--out",
}
"""Flags that were renamed to the one convention (``--out`` for a command's
file, ``--records-out``/``--spans-out`` for per-item JSON lines): the error
for an old one says the new name."""


class CliError(Exception):
    """A user error: printed as one line, exit code 2, no traceback."""


EXTRAS = {
    "rich": "cli",
    "yaml": "cli",
    "uvloop": "cli",
    "pyinstrument": "profile",
    "pyroscope": "profile",
    "locust": "locust",
    "gevent": "locust",
    "geventhttpclient": "locust",
    "grpc": "otlp",
    "google": "otlp",
    "opentelemetry": "otlp",
}
"""The extra that installs each optional module (pyproject.toml's optional-dependencies)."""


def needs_extra(module: str) -> str:
    """The one-line answer to a missing optional module."""
    top = module.split(".")[0]
    extra = EXTRAS[top]
    return f"this needs {top}, which the '{extra}' extra installs: pip install 'litellm_perfkit[{extra}]'"


def run_command(name: str, action: Callable[[], int]) -> int:
    """Run a command: one line for a user error or a missing extra; SIGTERM
    and SIGHUP stop it as Ctrl-C does (exit 128 + the signal's number)."""
    try:
        with stop_signals():
            return action()
    except CliError as exc:
        print(f"perfkit {name}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in EXTRAS:
            raise  # not an optional dependency: a bug worth its traceback
        print(f"perfkit {name}: error: {needs_extra(exc.name)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print(f"perfkit {name}: stopped by {signal_name(stop)}", file=sys.stderr)
        return exit_code(stop)


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
ratio = _number(float, lambda v: 0 <= v <= 1, "a number from 0 to 1")
port_number = _number(int, lambda v: 0 <= v <= 65535, "a port number (0-65535; 0 = any free port)")
fraction = _number(float, lambda v: 0 <= v <= 1, "a fraction between 0 and 1")


def record_rate(text: str) -> str:
    """``--record-rate``: ``all`` or requests a second > 0, as given (lower case)."""
    try:
        parse_record_rate(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'all' nor a number of requests a second > 0") from None
    return text.strip().lower()


_UNITS = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))


def duration(text: str) -> float:
    """Seconds from ``20``, ``20s``, ``500ms``, ``1.5m`` or ``1h`` (every duration flag takes these)."""
    value = text.strip().lower()
    scale = 1.0
    for suffix, factor in _UNITS:
        if value.endswith(suffix) and not (suffix == "s" and value.endswith("ms")):
            value, scale = value[: -len(suffix)], factor
            break
    try:
        seconds = float(value) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: use seconds (20, 20s) or 500ms, 1.5m, 1h"
        ) from None
    if seconds < 0 or seconds != seconds:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration >= 0")
    return seconds


def warmup(text: str) -> tuple[float, int]:
    """(seconds, requests): a duration (``5``, ``5s``) or a request count (``100r``)."""
    value = text.strip().lower()
    if value.endswith("r"):
        try:
            requests = int(value[:-1])
        except ValueError:
            requests = -1
        if requests < 0:
            raise argparse.ArgumentTypeError(f"{text!r}: use a duration (5, 5s) or a number of requests (100r)")
        return 0.0, requests
    try:
        return duration(value), 0
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: use a duration (5, 5s) or a number of requests (100r)") from None
