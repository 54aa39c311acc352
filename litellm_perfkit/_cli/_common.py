"""What every sub-command shares: one-line errors, Ctrl-C, number parsing,
the API key, output files, and the choices and defaults the options declare."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args

from .._stop import exit_code, signal_name, stop_signals
from .._wire._environment_variables import PERFKIT_API_KEY
from .._wire._record_rate import parse_record_rate
from ..types import ProgressMode

__all__ = [
    "CliError",
    "EXTRAS",
    "add_api_key",
    "add_progress",
    "api_key",
    "choices",
    "count",
    "default",
    "duration",
    "fraction",
    "needs_extra",
    "non_negative",
    "outputs",
    "port_number",
    "positive_int",
    "record_rate",
    "run_command",
    "warmup",
]


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
    "grpc": "cli",
    "opentelemetry": "sdk",  # the api is a dependency; the sdk is the extra
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
count = _number(int, lambda v: v >= 0, "a whole number >= 0")
port_number = _number(int, lambda v: 0 <= v <= 65535, "a port number (0-65535; 0 = any free port)")


def fraction(text: str) -> float:
    """A share from 0 to 1, as ``0.05`` or ``5%``: every fraction flag takes both."""
    value = text.strip()
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction: write 0.05 or 5%") from None
    if not 0 <= number <= 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction from 0 to 1: write 0.05 or 5%")
    return number


def choices(literal: Any, leave_out: tuple[str, ...] = ()) -> list[str]:
    """A flag's choices: the values of a ``types`` Literal, their one home."""
    return [value for value in get_args(literal) if value not in leave_out]


def default(options: Any, name: str) -> Any:
    """The default an options dataclass's field (or a function's parameter)
    declares: the flag that fills it shows and uses it, so the two cannot drift."""
    if not dataclasses.is_dataclass(options):
        return inspect.signature(options).parameters[name].default
    for option in dataclasses.fields(options):
        if option.name == name:
            if option.default is not dataclasses.MISSING:
                return option.default
            if option.default_factory is not dataclasses.MISSING:
                return option.default_factory()
    raise LookupError(f"{options!r} declares no default for {name}")


def add_defaulted(group: Any, flag: str, parse: Callable[[str], Any], value: Any, help: str) -> None:
    """An option whose help ends with its default, a float in its shortest form: ``(default: 20)``."""
    shown = f"{value:g}" if isinstance(value, float) else value
    group.add_argument(flag, type=parse, default=value, help=f"{help} (default: {shown})")


def add_progress(group: Any, default_mode: str) -> None:
    group.add_argument(
        "--progress",
        choices=choices(ProgressMode),
        default=default_mode,
        help=f"the load driver's progress bars (auto: on a terminal; default: {default_mode})",
    )


def add_api_key(group: Any, default_key: str, note: str = "") -> None:
    """The bearer key comes from the environment or a file, never argv (where ps shows it)."""
    group.add_argument(
        "--api-key-file",
        metavar="PATH",
        help=f"read the key sent as Authorization: Bearer from this file; else ${PERFKIT_API_KEY} "
        f"(empty: none sent); else {default_key}{note}. Never on the command line, where ps shows it",
    )


def api_key(args: argparse.Namespace, default_key: str | None) -> str | None:
    """The bearer key: --api-key-file, else $PERFKIT_API_KEY (empty: none), else the default."""
    if args.api_key_file:
        try:
            key = Path(args.api_key_file).read_text().strip()
        except OSError as exc:
            raise CliError(f"cannot read --api-key-file {args.api_key_file}: {exc.strerror}") from None
        if not key:
            raise CliError(f"--api-key-file {args.api_key_file} is empty: write the key in it")
        return key
    if PERFKIT_API_KEY in os.environ:
        return os.environ[PERFKIT_API_KEY].strip() or None
    return default_key


def outputs(paths: list[str] | None, kinds: Mapping[str, str], otherwise: str) -> dict[str, str]:
    """``--out`` files by kind: a file's kind from its extension (``kinds``:
    suffix to kind), ``otherwise`` for any other name; one file per kind."""
    found: dict[str, str] = {}
    for path in paths or ():
        kind = next((k for suffix, k in kinds.items() if path.lower().endswith(suffix)), otherwise)
        if kind in found:
            raise CliError(f"--out {found[kind]} and --out {path} are both the {kind}: give one file of each kind")
        found[kind] = path
    return found


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
