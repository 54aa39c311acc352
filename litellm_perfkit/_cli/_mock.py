"""``perfkit mock``: the mock OpenAI-compatible provider."""

from __future__ import annotations

import argparse
import errno
from typing import TYPE_CHECKING, Any

from ._common import CliError, fraction, non_negative, port_number, positive_int, run_command

if TYPE_CHECKING:
    from .._mock import MockConfig

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


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "mock", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=port_number,
        action="append",
        help="port to listen on; repeat for several deployments (default: 8000)",
    )
    timing = parser.add_argument_group("timing (milliseconds)")
    timing.add_argument(
        "--ttft-ms", type=non_negative, default=0.0, help="request received to first content chunk (default: 0)"
    )
    timing.add_argument("--itl-ms", type=non_negative, default=0.0, help="gap between content chunks (default: 0)")
    timing.add_argument(
        "--distribution",
        choices=["fixed", "uniform", "normal", "exponential", "lognormal"],
        default="fixed",
        help="how TTFT and ITL vary around their values (default: fixed)",
    )
    timing.add_argument("--spread-ms", type=non_negative, default=0.0, help="uniform half-width, or standard deviation")
    timing.add_argument("--jitter-ms", type=non_negative, default=0.0, help="extra uniform noise on every delay")
    size = parser.add_argument_group("size")
    size.add_argument("--chunks", type=positive_int, default=20, help="content chunks per response (default: 20)")
    size.add_argument(
        "--tokens-per-chunk",
        type=positive_int,
        default=1,
        help="tokens each content chunk counts for in usage (default: 1)",
    )
    faults = parser.add_argument_group("faults (fractions of requests)")
    faults.add_argument("--error-500-rate", type=fraction, default=0.0, help="answer HTTP 500 (an upstream failure)")
    faults.add_argument(
        "--error-429-rate", type=fraction, default=0.0, help="answer HTTP 429 with retry-after (rate limited)"
    )
    faults.add_argument("--timeout-rate", type=fraction, default=0.0, help="never answer (a stuck upstream)")
    faults.add_argument("--disconnect-rate", type=fraction, default=0.0, help="cut the connection mid-stream")
    quota = parser.add_argument_group("quota, per deployment")
    quota.add_argument("--rpm", type=positive_int, default=0, help="requests per minute; 429 beyond it")
    quota.add_argument("--tpm", type=positive_int, default=0, help="tokens per minute; 429 beyond it")
    parser.add_argument("--seed", type=int, help="make every random draw repeatable")
    parser.add_argument("--config", help="JSON or YAML file: default profile, per-model profiles, deployments")
    parser.set_defaults(run=run)


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
        error_500_rate=args.error_500_rate,
        error_429_rate=args.error_429_rate,
        timeout_rate=args.timeout_rate,
        disconnect_rate=args.disconnect_rate,
    )
    ports = args.port or [8000]
    deployments = tuple(
        Deployment(f"deployment-{i + 1}", port, int(args.rpm), int(args.tpm)) for i, port in enumerate(ports)
    )
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


__all__ = ["add_parser", "build_config", "run"]
