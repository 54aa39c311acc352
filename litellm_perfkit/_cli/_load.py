"""``perfkit load``: drive an OpenAI-compatible endpoint and measure it."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ._common import CliError, duration, non_negative, positive_int, run_command, warmup

if TYPE_CHECKING:
    from .._load import LoadPlan, Workload

HELP = "drive an OpenAI-compatible endpoint: RPS, latency, TTFT, ITL, overhead headers"
DESCRIPTION = """\
Send chat completions to URL and measure them exactly (docs/metrics.md).

Closed loop (--concurrency N): N users, each sends when its last answer ends.
Open loop (--rate R): R requests/s on a fixed schedule, whatever the answers;
latency then counts from each request's intended start (corrected for
coordinated omission) and is also shown from the actual send (uncorrected).

A base URL gets /v1/chat/completions appended. Prompts follow LiteLLM's load
tests: a uuid and a sentence, repeated --prompt-repeats times (no cache hits).

examples:
  perfkit load --url http://127.0.0.1:4000 --concurrency 50 --duration 30s --warmup 5s
  perfkit load --url http://127.0.0.1:4000 --rate 200 --arrival poisson --stream --out run.json
  perfkit load --url http://127.0.0.1:8000 --requests 5000 --processes 2 --header "x-team:a"
"""


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME:VALUE")
    return name.strip(), value.strip()


def _model(text: str) -> tuple[str, float]:
    name, sep, weight = text.partition("=")
    try:
        return name, float(weight) if sep else 1.0
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use NAME or NAME=WEIGHT") from None


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "load", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--url", required=True, help="the endpoint or base URL (http://host:port[/v1])")
    p.add_argument(
        "--model",
        type=_model,
        action="append",
        help="model name; repeat NAME=WEIGHT for a mix (default: fake-openai-endpoint)",
    )
    shape = p.add_argument_group("load shape")
    shape.add_argument(
        "--concurrency",
        type=positive_int,
        help="closed loop: this many users (default: 10); with --rate: at most this many in flight",
    )
    shape.add_argument("--rate", type=non_negative, help="open loop: requests per second")
    shape.add_argument(
        "--arrival", choices=["constant", "poisson"], default="constant", help="open-loop spacing (default: constant)"
    )
    length = shape.add_mutually_exclusive_group()
    length.add_argument("--duration", type=duration, help="how long to measure: 30, 30s, 2m (default: 10s)")
    length.add_argument("--requests", type=positive_int, help="requests to measure")
    shape.add_argument(
        "--warmup",
        type=warmup,
        default=(0.0, 0),
        help="sent but not counted, first: a duration (5s) or requests (100r) (default: none)",
    )
    shape.add_argument(
        "--ramp", type=duration, default=0.0, help="ramp users or rate up from zero over this long (default: none)"
    )
    shape.add_argument(
        "--repeats", type=positive_int, default=1, help="run this many times; report the median run and the spread"
    )
    shape.add_argument(
        "--processes", type=positive_int, default=1, help="driver processes; their histograms merge exactly"
    )
    shape.add_argument(
        "--driver",
        choices=["perfkit", "locust"],
        default="perfkit",
        help="perfkit's own client (default), or Locust with perfkit's user (closed loop by duration; docs/distributed.md)",
    )
    body = p.add_argument_group("requests")
    body.add_argument("--stream", action="store_true", help="streaming requests (measures TTFT and ITL)")
    body.add_argument(
        "--max-tokens", type=positive_int, help="max_tokens in each request (default: not sent; Messages: 1024)"
    )
    body.add_argument(
        "--prompt-repeats",
        type=positive_int,
        default=150,
        help="sentence repeats per prompt (default: 150, as LiteLLM's tests)",
    )
    body.add_argument("--body-file", help="a JSON request body to send instead (model and stream are still set)")
    body.add_argument("--header", type=_header, action="append", default=[], help="NAME:VALUE, repeatable")
    body.add_argument("--api-key", default="sk-1234", help="sent as Authorization: Bearer (default: sk-1234)")
    body.add_argument("--timeout", type=duration, default=60.0, help="per request, connect included (default: 60s)")
    body.add_argument("--seed", type=int, help="seed of the arrival schedule and model mix (default: random)")
    out = p.add_argument_group("output")
    out.add_argument("--out", help="write the result JSON here (schema perfkit.load/1)")
    out.add_argument(
        "--records-out", metavar="FILE", help="also write one JSON line per request here (docs/metrics.md)"
    )
    out.add_argument(
        "--progress", choices=["auto", "on", "off"], default="auto", help="progress bar (auto: on a terminal)"
    )
    out.add_argument("--json", action="store_true", help="print the result JSON instead of the table")
    p.set_defaults(run=run)


def build(args: argparse.Namespace) -> tuple[Workload, LoadPlan]:
    from .._load import LoadPlan, Workload, WorkloadError

    template = None
    if args.body_file:
        try:
            template = json.loads(Path(args.body_file).read_text())
        except OSError as exc:
            raise CliError(f"cannot read --body-file {args.body_file}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise CliError(f"--body-file {args.body_file} is not valid JSON: {exc}") from None
        if not isinstance(template, dict):
            raise CliError("--body-file must hold a JSON object")
    try:
        workload = Workload(
            url=args.url,
            models=tuple(args.model or [("fake-openai-endpoint", 1.0)]),
            stream=args.stream,
            max_tokens=args.max_tokens,
            prompt_repeats=args.prompt_repeats,
            body_template=template,
            headers=tuple(args.header),
            api_key=args.api_key or None,
        )
    except WorkloadError as exc:
        raise CliError(str(exc)) from None
    warmup_s, warmup_requests = args.warmup
    if args.rate is not None and args.rate <= 0:
        raise CliError("--rate must be above 0")
    plan = LoadPlan(
        concurrency=args.concurrency if args.rate else (args.concurrency or 10),
        rate=args.rate,
        arrival=args.arrival,
        duration_s=None if args.requests else (args.duration if args.duration is not None else 10.0),
        requests=args.requests,
        warmup_s=warmup_s,
        warmup_requests=warmup_requests,
        ramp_s=args.ramp,
        timeout_s=args.timeout,
        seed=args.seed,
    )
    return workload, plan


def run(args: argparse.Namespace) -> int:
    from .._load import LocustError, WorkloadError, render_table, run_load

    def action() -> int:
        workload, plan = build(args)
        if args.driver == "locust" and (args.body_file or args.header):
            raise CliError(
                "--body-file and --header are not supported with --driver locust; subclass litellm_perfkit.locust.ChatCompletionsUser"
            )
        try:
            result = run_load(
                workload,
                plan,
                processes=args.processes,
                repeats=args.repeats,
                progress=args.progress,
                jsonl_path=args.records_out,
                driver=args.driver,
            )
        except (WorkloadError, LocustError) as exc:
            raise CliError(str(exc)) from None
        if args.out:
            try:
                Path(args.out).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
            except OSError as exc:
                raise CliError(f"cannot write --out {args.out}: {exc.strerror}") from None
        if args.json:
            sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            print(render_table(result))
        summary = result["summary"]
        if not result["complete"]:
            stopped_by = result.get("stopped_by", "SIGINT")
            where = f"; what was measured is in {args.out}" if args.out else ""
            print(f"perfkit load: stopped by {stopped_by}{where}", file=sys.stderr)
            return 128 + int(signal.Signals[stopped_by])
        if summary["ok"] == 0:
            first = next(iter(result["errors"].values()), {"meaning": "no request completed"})
            print(f"perfkit load: error: every request failed: {first['meaning']}", file=sys.stderr)
            return 1
        return 0

    return run_command("load", action)
