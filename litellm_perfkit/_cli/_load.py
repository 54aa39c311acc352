"""``perfkit load``: drive an OpenAI-compatible endpoint and measure it."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import orjson

from ..types import Arrival, Driver, TraceparentMode
from ._common import (
    CliError,
    add_api_key,
    add_progress,
    api_key,
    choices,
    default,
    duration,
    non_negative,
    outputs,
    positive_int,
    run_command,
    warmup,
)

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
  perfkit load --url http://127.0.0.1:4000 --rate 200 --arrival poisson --stream --out run.json --out requests.jsonl
  PERFKIT_API_KEY=sk-my-key perfkit load --url http://127.0.0.1:4000 --model gpt-4o=3 --model claude=1 --json
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


if TYPE_CHECKING:
    from .._load import LoadPlan, Workload

OUTPUTS = {".jsonl": "per-request lines"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .._load import LoadPlan, Workload, run_load

    plan = LoadPlan()
    models: tuple[tuple[str, float], ...] = default(Workload, "models")
    prompt_repeats: int = default(Workload, "prompt_repeats")
    driving = {name: default(run_load, name) for name in ("processes", "repeats", "progress", "driver")}
    p.add_argument("--url", required=True, help="the endpoint or base URL (http://host:port[/v1])")
    p.add_argument(
        "--model",
        type=_model,
        action="append",
        help=f"model name; repeat NAME=WEIGHT for a mix (default: {', '.join(name for name, _ in models)})",
    )
    shape = p.add_argument_group("load shape")
    shape.add_argument(
        "--concurrency",
        type=positive_int,
        help=f"closed loop: this many users (default: {plan.concurrency}); with --rate: at most this many in flight",
    )
    shape.add_argument("--rate", type=non_negative, help="open loop: requests per second")
    shape.add_argument(
        "--arrival",
        choices=choices(Arrival),
        default=plan.arrival,
        help=f"open-loop spacing (default: {plan.arrival})",
    )
    length = shape.add_mutually_exclusive_group()
    length.add_argument(
        "--duration", type=duration, help=f"how long to measure: 30, 30s, 2m (default: {plan.duration_s:g}s)"
    )
    length.add_argument("--requests", type=positive_int, help="requests to measure")
    shape.add_argument(
        "--warmup",
        type=warmup,
        default=(plan.warmup_s, plan.warmup_requests),
        help="sent but not counted, first: a duration (5s) or requests (100r) (default: none)",
    )
    shape.add_argument(
        "--ramp",
        type=duration,
        default=plan.ramp_s,
        help="ramp users or rate up from zero over this long (default: none)",
    )
    shape.add_argument(
        "--repeats",
        type=positive_int,
        default=driving["repeats"],
        help=f"run this many times; report the median run and the spread (default: {driving['repeats']})",
    )
    shape.add_argument(
        "--processes",
        type=positive_int,
        default=driving["processes"],
        help=f"driver processes; their histograms merge exactly (default: {driving['processes']})",
    )
    shape.add_argument(
        "--driver",
        choices=choices(Driver),
        default=driving["driver"],
        help=f"perfkit's own client, or Locust with perfkit's user (closed loop by duration; docs/distributed.md) "
        f"(default: {driving['driver']})",
    )
    body = p.add_argument_group("requests")
    body.add_argument("--stream", action="store_true", help="streaming requests (measures TTFT and ITL)")
    body.add_argument(
        "--max-tokens", type=positive_int, help="max_tokens in each request (default: not sent; Messages: 1024)"
    )
    body.add_argument(
        "--prompt-repeats",
        type=positive_int,
        default=prompt_repeats,
        help=f"sentence repeats per prompt (default: {prompt_repeats}, as LiteLLM's tests)",
    )
    body.add_argument("--body-file", help="a JSON request body to send instead (model and stream are still set)")
    body.add_argument("--header", type=_header, action="append", default=[], help="NAME:VALUE, repeatable")
    add_api_key(body, default(Workload, "api_key"), " (perfkit bench's embedded config's master key)")
    body.add_argument(
        "--traceparent",
        choices=get_args(TraceparentMode),
        default=default(Workload, "traceparent"),
        help="a fresh W3C traceparent per request: sampled (perfkit in the proxy records every such request, "
        "whatever its record rate), unsampled (the proxy's record rate decides), or off (default: %(default)s)",
    )
    body.add_argument(
        "--timeout",
        type=duration,
        default=plan.timeout_s,
        help=f"per request, connect included (default: {plan.timeout_s:g}s)",
    )
    body.add_argument("--seed", type=int, help="seed of the arrival schedule and model mix (default: random)")
    out = p.add_argument_group("output")
    out.add_argument(
        "--out",
        action="append",
        metavar="FILE",
        help="write the result JSON here (schema perfkit.load/1); a FILE ending .jsonl gets one JSON line per "
        "request instead (docs/metrics.md): repeat --out for both",
    )
    add_progress(out, driving["progress"])
    out.add_argument(
        "--json",
        action="store_true",
        help="print the result JSON on stdout instead of the table (a display choice; --out writes files)",
    )


def build(args: argparse.Namespace) -> tuple[Workload, LoadPlan]:
    from .._load import LoadPlan, Workload, WorkloadError

    plan_defaults = LoadPlan()

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
            models=tuple(args.model or default(Workload, "models")),
            stream=args.stream,
            max_tokens=args.max_tokens,
            prompt_repeats=args.prompt_repeats,
            body_template=template,
            headers=tuple(args.header),
            api_key=api_key(args, default(Workload, "api_key")),
            traceparent=args.traceparent,
        )
    except WorkloadError as exc:
        raise CliError(str(exc)) from None
    warmup_s, warmup_requests = args.warmup
    if args.rate is not None and args.rate <= 0:
        raise CliError("--rate must be above 0")
    plan = LoadPlan(
        concurrency=args.concurrency if args.rate else (args.concurrency or plan_defaults.concurrency),
        rate=args.rate,
        arrival=args.arrival,
        duration_s=None
        if args.requests
        else (args.duration if args.duration is not None else plan_defaults.duration_s),
        requests=args.requests,
        warmup_s=warmup_s,
        warmup_requests=warmup_requests,
        ramp_s=args.ramp,
        timeout_s=args.timeout,
        seed=args.seed,
    )
    return workload, plan


def run(args: argparse.Namespace) -> int:
    from .._load import load_errors, render_table, run_load

    def action() -> int:
        files = outputs(args.out, OUTPUTS, "result")
        result_out, records_out = files.get("result"), files.get("per-request lines")
        workload, plan = build(args)
        if args.driver == "locust" and (args.body_file or args.header):
            raise CliError(
                "--body-file and --header are not supported with --driver locust; subclass litellm_perfkit.locust.ChatCompletionsUser"
            )
        with load_errors(CliError):
            result = run_load(
                workload,
                plan,
                processes=args.processes,
                repeats=args.repeats,
                progress=args.progress,
                jsonl_path=records_out,
                driver=args.driver,
            )
        if result_out:
            try:
                Path(result_out).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
            except OSError as exc:
                raise CliError(f"cannot write --out {result_out}: {exc.strerror}") from None
        if args.json:
            sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            print(render_table(result))
        summary = result["summary"]
        if not result["complete"]:
            stopped_by = result.get("stopped_by", "SIGINT")
            where = f"; what was measured is in {result_out}" if result_out else ""
            print(f"perfkit load: stopped by {stopped_by}{where}", file=sys.stderr)
            return 128 + int(signal.Signals[stopped_by])
        if summary["ok"] == 0:
            first = next(iter(result["errors"].values()), {"meaning": "no request completed"})
            print(f"perfkit load: error: every request failed: {first['meaning']}", file=sys.stderr)
            return 1
        return 0

    return run_command("load", action)
