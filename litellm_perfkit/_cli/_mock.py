"""``perfkit mock``: the mock OpenAI-compatible provider."""

from __future__ import annotations

import argparse
import errno
from typing import TYPE_CHECKING

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
    timing = parser.add_argument_group("timing (milliseconds)")
    timing.add_argument(
        "--ttft-ms",
        type=non_negative,
        default=profile.ttft_ms,
        help=f"request received to first content chunk (default: {profile.ttft_ms:g})",
    )
    timing.add_argument(
        "--itl-ms",
        type=non_negative,
        default=profile.itl_ms,
        help=f"gap between content chunks (default: {profile.itl_ms:g})",
    )
    timing.add_argument(
        "--distribution",
        choices=choices(Distribution),
        default=profile.distribution,
        help=f"how TTFT and ITL vary around their values (default: {profile.distribution})",
    )
    timing.add_argument(
        "--spread-ms",
        type=non_negative,
        default=profile.spread_ms,
        help=f"uniform half-width, or standard deviation (default: {profile.spread_ms:g})",
    )
    timing.add_argument(
        "--jitter-ms",
        type=non_negative,
        default=profile.jitter_ms,
        help=f"extra uniform noise on every delay (default: {profile.jitter_ms:g})",
    )
    size = parser.add_argument_group("size")
    size.add_argument(
        "--chunks",
        type=positive_int,
        default=profile.chunks,
        help=f"content chunks per response (default: {profile.chunks})",
    )
    size.add_argument(
        "--tokens-per-chunk",
        type=positive_int,
        default=profile.tokens_per_chunk,
        help=f"tokens each content chunk counts for in usage (default: {profile.tokens_per_chunk})",
    )
    faults = parser.add_argument_group("faults (fractions of requests: 0.05 or 5%%; default: 0)")
    faults.add_argument(
        "--error-500-fraction",
        type=fraction,
        default=profile.error_500_fraction,
        help="answer HTTP 500 (an upstream failure)",
    )
    faults.add_argument(
        "--error-429-fraction",
        type=fraction,
        default=profile.error_429_fraction,
        help="answer HTTP 429 with retry-after (rate limited)",
    )
    faults.add_argument(
        "--timeout-fraction",
        type=fraction,
        default=profile.timeout_fraction,
        help="never answer (a stuck upstream)",
    )
    faults.add_argument(
        "--disconnect-fraction",
        type=fraction,
        default=profile.disconnect_fraction,
        help="cut the connection mid-stream",
    )
    faults.add_argument(
        "--malformed-fraction",
        type=fraction,
        default=profile.malformed_fraction,
        help="send one SSE event whose JSON is cut (a JSON answer: its body cut in half)",
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
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        distribution=args.distribution,
        spread_ms=args.spread_ms,
        jitter_ms=args.jitter_ms,
        chunks=args.chunks,
        tokens_per_chunk=args.tokens_per_chunk,
        error_500_fraction=args.error_500_fraction,
        error_429_fraction=args.error_429_fraction,
        timeout_fraction=args.timeout_fraction,
        disconnect_fraction=args.disconnect_fraction,
        malformed_fraction=args.malformed_fraction,
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
