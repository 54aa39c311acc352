"""``perfkit mock``: the mock OpenAI-compatible provider."""

from __future__ import annotations

import argparse
import errno
from typing import TYPE_CHECKING, Any

from ..types import Distribution
from ._common import CliError, choices, count, default, fraction, non_negative, port_number, positive_int, run_command

HELP = "run the mock OpenAI-compatible provider (known TTFT, ITL, chunks, faults, quotas)"
DESCRIPTION = """\
A local OpenAI-compatible provider whose timing is known exactly, for measuring
what a gateway adds. Endpoints (POST, with or without /v1):
  /chat/completions, /completions, /embeddings    OpenAI
  /responses                                      OpenAI Responses API
  /messages                                       Anthropic Messages
  /openai/deployments/NAME/chat/completions?api-version=...   Azure OpenAI
GET /v1/models and /health answer too.

Every response and stream chunk carries the mock's send time in a "perfkit"
field; see docs/mock.md.

examples:
  perfkit mock --port 8000 --ttft-ms 50 --itl-ms 10 --chunks 20
  perfkit mock --port 8001 --port 8002 --rpm 10000      two deployments, 10K RPM each
  perfkit mock --config mock.yaml                       per-model profiles
"""


if TYPE_CHECKING:
    from .._mock import MockConfig


def _port() -> int:
    from .._mock import MockConfig

    port: int = default(MockConfig, "deployments")[0].port
    return port


# The default profile's flags, by help group: (ModelProfile field, how its flag parses, help).
# Each flag is --FIELD and defaults to the field's default, which a help shows where it says {default}.
_PROFILE_OPTIONS: dict[str, tuple[tuple[str, dict[str, Any], str], ...]] = {
    "timing (milliseconds)": (
        ("ttft_ms", {"type": non_negative}, "request received to first content chunk (default: {default})"),
        ("itl_ms", {"type": non_negative}, "gap between content chunks (default: {default})"),
        (
            "distribution",
            {"choices": choices(Distribution)},
            "how TTFT and ITL vary around their values (default: {default})",
        ),
        ("spread_ms", {"type": non_negative}, "uniform half-width, or standard deviation (default: {default})"),
        ("jitter_ms", {"type": non_negative}, "extra uniform noise on every delay (default: {default})"),
    ),
    "size": (
        ("chunks", {"type": positive_int}, "content chunks per response (default: {default})"),
        (
            "tokens_per_chunk",
            {"type": positive_int},
            "tokens each content chunk counts for in usage (default: {default})",
        ),
    ),
    "faults (fractions of requests: 0.05 or 5%%; default: 0)": (
        ("error_500_fraction", {"type": fraction}, "answer HTTP 500 (an upstream failure)"),
        ("error_429_fraction", {"type": fraction}, "answer HTTP 429 with retry-after (rate limited)"),
        ("timeout_fraction", {"type": fraction}, "never answer (a stuck upstream)"),
        ("disconnect_fraction", {"type": fraction}, "cut the connection mid-stream"),
        (
            "malformed_fraction",
            {"type": fraction},
            "send one SSE event whose JSON is cut (a JSON answer: its body cut in half)",
        ),
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .._mock import Deployment, MockConfig, ModelProfile

    profile = ModelProfile()
    host: str = default(MockConfig, "host")
    rpm: int = default(Deployment, "rpm")
    tpm: int = default(Deployment, "tpm")
    parser.add_argument("--host", default=host, help=f"address to bind (default: {host})")
    parser.add_argument(
        "--port",
        type=port_number,
        action="append",
        help=f"port to listen on; repeat for several deployments (default: {_port()})",
    )
    for title, options in _PROFILE_OPTIONS.items():
        group = parser.add_argument_group(title)
        for name, parse, help_text in options:
            value = getattr(profile, name)
            group.add_argument(
                "--" + name.replace("_", "-"),
                default=value,
                help=help_text.format(default=f"{value:g}" if isinstance(value, float) else value),
                **parse,
            )
    quota = parser.add_argument_group("quota, per deployment")
    quota.add_argument(
        "--rpm", type=count, default=rpm, help=f"requests per minute; 429 beyond it (default: {rpm}, no limit)"
    )
    quota.add_argument(
        "--tpm", type=count, default=tpm, help=f"tokens per minute; 429 beyond it (default: {tpm}, no limit)"
    )
    parser.add_argument("--seed", type=int, help="make every random draw repeatable")
    parser.add_argument("--config", help="JSON or YAML file: default profile, per-model profiles, deployments")


def build_config(args: argparse.Namespace) -> MockConfig:
    from .._mock import ConfigError, Deployment, MockConfig, ModelProfile, load_config

    profile = ModelProfile(
        **{name: getattr(args, name) for options in _PROFILE_OPTIONS.values() for name, _, _ in options}
    )
    ports = args.port or [_port()]
    deployments = tuple(Deployment(f"deployment-{i + 1}", port, args.rpm, args.tpm) for i, port in enumerate(ports))
    try:
        config = MockConfig(host=args.host, default=profile.validate(), deployments=deployments, seed=args.seed)
        return load_config(args.config, config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from .._mock import serve

    def action() -> int:
        config = build_config(args)
        try:
            serve(config)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                ports = ", ".join(str(d.port) for d in config.deployments)
                raise CliError(f"port {ports} is already in use; pick another with --port") from None
            raise CliError(f"cannot listen on {config.host}: {exc.strerror or exc}") from None
        return 0

    return run_command("mock", action)


__all__ = ["add_arguments", "build_config", "run"]
