"""``perfkit run -- COMMAND``: run a LiteLLM proxy instrumented, with no code change."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .._wire import _environment_variables as variables
from .._wire._record_rate import DEFAULT_RECORD_RATE, record_rate_in
from ..types import ExporterName, ExportMode, HeaderMode, OtlpProtocol, SamplerName
from ._common import CliError, choices, fraction, positive_int, record_rate, run_command

HELP = "run a command (the LiteLLM proxy) with perfkit loaded in every process"
DESCRIPTION = """\
Runs COMMAND with perfkit loaded before anything else in every Python process
it starts, uvicorn workers included: the LiteLLM proxy is instrumented the
moment litellm.proxy.proxy_server is imported, and each worker exports its own
spans and metrics. Export follows the OTEL_* variables; the options below set
them for you. Nothing is changed in the proxy's configuration.

Each worker records about 10 requests a second by default (--record-rate):
all of them while the proxy is lightly used, a sample once it is busy, so
that a saturated proxy pays for ten a second, not for every request. The
others pass through untouched and are counted. What the default and
--record-rate all cost a saturated LiteLLM proxy, as measured, with the
commands that measure it: docs/overhead.md.

examples:
  perfkit run -- litellm --config config.yaml --port 4000 --num_workers 2
  perfkit run --endpoint http://127.0.0.1:4318 --protocol http/protobuf -- litellm --config config.yaml
  perfkit run --out spans.jsonl -- litellm --config config.yaml      # spans to a file, not OTLP
  perfkit run --record-rate all -- litellm --config config.yaml   # every request, at a cost
  perfkit run --stage-profile profiles/ --pyroscope http://127.0.0.1:4040 -- litellm --config config.yaml
"""

BOOTSTRAP = Path(__file__).resolve().parents[1] / "_litellm" / "_bootstrap"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--service-name",
        help="perfkit's service name (PERFKIT_OTEL_SERVICE_NAME, over OTEL_SERVICE_NAME; default: litellm-proxy)",
    )
    p.add_argument(
        "--exporter",
        choices=choices(ExporterName, leave_out=("sdk",)),  # sdk: a host's own TracerProvider, in-process only
        help="PERFKIT_OTEL_TRACES_EXPORTER, over OTEL_TRACES_EXPORTER (default: otlp)",
    )
    p.add_argument(
        "--endpoint",
        help="PERFKIT_OTEL_EXPORTER_OTLP_ENDPOINT, over OTEL_EXPORTER_OTLP_ENDPOINT (default: http://localhost:4318)",
    )
    p.add_argument(
        "--protocol",
        choices=choices(OtlpProtocol),
        help="PERFKIT_OTEL_EXPORTER_OTLP_PROTOCOL, over OTEL_EXPORTER_OTLP_PROTOCOL",
    )
    p.add_argument(
        "--sampler",
        choices=choices(SamplerName),
        metavar="SAMPLER",
        help="PERFKIT_OTEL_TRACES_SAMPLER, over OTEL_TRACES_SAMPLER: "
        f"{', '.join(choices(SamplerName))} (a ratio with --sampler-arg)",
    )
    p.add_argument("--sampler-arg", help="PERFKIT_OTEL_TRACES_SAMPLER_ARG, e.g. 0.1")
    p.add_argument(
        "--record-ratio",
        type=fraction,
        help="record this share of requests (a fraction, 0.1, or a percent), drawn when each starts (PERFKIT_RECORD_RATIO, default 1): the others "
        "pass through untouched, so perfkit's cost falls in proportion; spans and metrics describe the sample",
    )
    p.add_argument(
        "--record-rate",
        type=record_rate,
        metavar="N|all",
        help=f"record about N requests a second per worker, drawn at random (PERFKIT_RECORD_RATE, default {DEFAULT_RECORD_RATE:g}: every request "
        "of a lightly used proxy, a random sample of a saturated one), or all; the others pass through "
        "with only their count, status and times tallied (the request metrics cover every request); "
        "what each costs: docs/overhead.md",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        help="write the spans to this file, one OTLP/JSON span per line, instead of exporting them "
        "(PERFKIT_JSONL_PATH; --exporter jsonl)",
    )
    p.add_argument(
        "--server-timing",
        choices=choices(HeaderMode),
        help="the Server-Timing response header (PERFKIT_SERVER_TIMING): to loopback clients and requests with "
        "$PERFKIT_HEADER_SECRET in x-perfkit-secret (trusted, the default), to all, or to none (docs/headers.md)",
    )
    p.add_argument(
        "--overhead-header",
        choices=choices(HeaderMode),
        help="the x-perfkit-overhead-ms response header (PERFKIT_OVERHEAD_HEADER), the same choices",
    )
    p.add_argument(
        "--prometheus-port",
        type=positive_int,
        metavar="PORT",
        help="serve perfkit's metrics at http://127.0.0.1:PORT/metrics in Prometheus' text format, every worker summed",
    )
    p.add_argument(
        "--prometheus-host",
        help="the address the Prometheus endpoint binds (PERFKIT_PROMETHEUS_HOST, default: 127.0.0.1)",
    )
    p.add_argument("--export-mode", choices=choices(ExportMode), help="PERFKIT_EXPORT_MODE (default: process)")
    prof = p.add_argument_group("profiling (docs/profiling.md)")
    prof.add_argument(
        "--stage-profile",
        metavar="DIR",
        help="per-stage CPU profiles: each worker writes DIR/stages-PID.* when it exits",
    )
    prof.add_argument(
        "--profile-dir",
        metavar="DIR",
        help="per-request profiles for requests with x-perfkit-profile: $PERFKIT_PROFILE_SECRET (the secret comes only from the environment)",
    )
    prof.add_argument(
        "--pyroscope", metavar="URL", help="continuous profiling: push to this pyroscope server, tagged by perfkit"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")


def environment(args: argparse.Namespace, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    env[variables.PERFKIT_RUN] = "1"
    env[variables.PERFKIT_RUN_PID] = str(os.getpid())  # exec keeps the pid: the command's own process
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(BOOTSTRAP), str(BOOTSTRAP.parents[2]), base.get("PYTHONPATH")])
    )
    # Every worker's metric snapshots: for --prometheus-port's server, and for
    # LiteLLM's own /metrics when its prometheus callback serves one.
    env[variables.PERFKIT_PROMETHEUS_DIR] = tempfile.mkdtemp(prefix="perfkit-prometheus-")
    if args.prometheus_port is not None:
        env[variables.PERFKIT_PROMETHEUS_PORT] = str(args.prometheus_port)
    # The export flags are perfkit's alone (PERFKIT_OTEL_*): the command's own
    # OpenTelemetry (LiteLLM's otel callback) keeps reading OTEL_* as set.
    for option, variable in (
        ("service_name", variables.PERFKIT_OTEL_SERVICE_NAME),
        ("exporter", variables.PERFKIT_OTEL_TRACES_EXPORTER),
        ("endpoint", variables.PERFKIT_OTEL_EXPORTER_OTLP_ENDPOINT),
        ("protocol", variables.PERFKIT_OTEL_EXPORTER_OTLP_PROTOCOL),
        ("sampler", variables.PERFKIT_OTEL_TRACES_SAMPLER),
        ("sampler_arg", variables.PERFKIT_OTEL_TRACES_SAMPLER_ARG),
        ("record_ratio", variables.PERFKIT_RECORD_RATIO),
        ("record_rate", variables.PERFKIT_RECORD_RATE),
        ("out", variables.PERFKIT_JSONL_PATH),
        ("server_timing", variables.PERFKIT_SERVER_TIMING),
        ("overhead_header", variables.PERFKIT_OVERHEAD_HEADER),
        ("prometheus_host", variables.PERFKIT_PROMETHEUS_HOST),
        ("export_mode", variables.PERFKIT_EXPORT_MODE),
        ("stage_profile", variables.PERFKIT_STAGE_PROFILE_DIR),
        ("profile_dir", variables.PERFKIT_PROFILE_DIR),
        ("pyroscope", variables.PERFKIT_PYROSCOPE_URL),
    ):
        value = getattr(args, option)
        if value is not None:
            # Directories absolute: workers may change directory before they write.
            env[variable] = os.path.abspath(value) if option in ("stage_profile", "profile_dir") else str(value)
    return env


def run(args: argparse.Namespace) -> int:
    def action() -> int:
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            raise CliError("give the command to run after --, e.g. perfkit run -- litellm --config config.yaml")
        executable = shutil.which(command[0])
        if executable is None:
            raise CliError(f"command not found: {command[0]}")
        if args.exporter == "jsonl" and not args.out:
            raise CliError("--exporter jsonl needs --out FILE")
        if args.out and args.exporter not in (None, "jsonl"):
            raise CliError(
                f"--out writes the spans to a file; --exporter {args.exporter} sends them elsewhere: drop one"
            )
        if args.out:
            args.exporter = "jsonl"
        if args.profile_dir and not os.environ.get(variables.PERFKIT_PROFILE_SECRET):
            raise CliError(
                "--profile-dir needs a secret: export PERFKIT_PROFILE_SECRET=<token> (not on the command line, where ps shows it)"
            )
        if args.pyroscope and not args.pyroscope.startswith(("http://", "https://")):
            raise CliError(f"--pyroscope {args.pyroscope!r}: give the server's URL, e.g. http://127.0.0.1:4040")
        env = environment(args, dict(os.environ))
        rate = record_rate_in(env) or DEFAULT_RECORD_RATE  # a bad value: the workers warn, and use the default
        if rate != "all":  # fewer spans than requests should surprise nobody
            print(
                f"perfkit run: recording about {rate:g} requests a second per worker, every request below that "
                "(--record-rate all: every request, at a cost: docs/overhead.md)",
                file=sys.stderr,
                flush=True,
            )
        # exec: the command takes this process's place, so Ctrl-C and signals reach it directly.
        try:
            os.execve(executable, command, env)
        except OSError as exc:  # e.g. a script whose interpreter (its #! line) is gone
            raise CliError(
                f"cannot run {executable}: {exc.strerror}; check its first line and that it is executable"
            ) from None
        return 0  # not reached

    return run_command("run", action)
