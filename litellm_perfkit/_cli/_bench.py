"""``perfkit bench``: mock + proxy + load + spans, one command."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from .._wire._record_rate import DEFAULT_RECORD_RATE
from ..types import BenchDeployment, BenchFlamegraph, BenchHeadline, BenchScenario, BenchSweepPairs, Driver
from ._common import (
    CliError,
    add_api_key,
    add_defaulted,
    add_progress,
    api_key,
    choices,
    duration,
    non_negative,
    positive_int,
    record_rate,
    run_command,
    warmup,
)

if TYPE_CHECKING:
    from .._bench._options import BenchOptions

HELP = "measure what the LiteLLM proxy adds, and where inside it the time goes"
DESCRIPTION = """\
Runs the whole overhead experiment: starts the mock provider and measures it
directly; starts the LiteLLM proxy installed here under `perfkit run` with an
embedded config, its spans exported to an embedded receiver, and beside it the
same proxy plain; warms both up; runs a non-streaming and a streaming phase,
the two proxies taking turns in bursts; joins the recorded proxy's spans to the
client's records by trace id; stops everything; prints the results and writes
JSON. RPS, latency and the proxy's CPU are the plain proxy's, and perfkit's own
cost (recorded against plain) is a row with its 95% interval (--headline).

Results: RPS and latency, client-observed overhead (proxy minus direct),
x-litellm-overhead-duration-ms, TTFT and the TTFT the proxy adds, full-stream
time, each stage's p50/p95 and share of the overhead with the unattributed
remainder, the fast paths taken, and the proxy's CPU and RSS. See docs/bench.md.

examples:
  perfkit bench
  perfkit bench --litellm-version 1.83.14,1.103.0 --out sweep.json
  perfkit bench --workers 2 --repeats 3 --label my-change
  perfkit bench --headline recorded         # every figure from the proxy under perfkit run
  perfkit bench --workers 1,2 --driver locust --processes 2
  perfkit bench --flamegraph speedscope     # then: perfkit report perfkit-bench.json --out report.html
  perfkit bench --proxy-command "python my_gateway.py --port {port} --upstream {upstream}"
  perfkit bench --perturbation --litellm-version 1.103.0 --out perturbation.json
"""


OUT = "perfkit-bench.json"


def _list(kind: type, what: str) -> Any:
    def parse(text: str) -> tuple[Any, ...]:
        try:
            values = tuple(kind(part.strip()) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}")
        return values

    return parse


def _positive_duration(text: str) -> float:
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the baseline needs a duration > 0")
    return seconds


def add_load_arguments(
    p: argparse.ArgumentParser, defaults: BenchOptions, phases: Literal["repeated", "pairs"] = "repeated"
) -> Any:
    """The load and mock options of a bench (bench, bisect), their defaults from ``defaults``; the load group.
    ``phases="pairs"`` (bisect): only what a pair uses, its non-streaming bursts from perfkit's own client in
    one process (no ``--repeats``, ``--stream-concurrency``, ``--driver``, ``--processes``, ``--progress``)."""
    load = p.add_argument_group("load")
    add_defaulted(load, "--concurrency", positive_int, defaults.concurrency, "users in the non-streaming phase")
    if phases == "repeated":
        add_defaulted(
            load, "--stream-concurrency", positive_int, defaults.stream_concurrency, "users in the streaming phase"
        )
    load.add_argument(
        "--duration",
        type=duration,
        default=defaults.duration_s,
        help=(
            "how long each proxy phase measures (with --headline plain, both proxies' bursts together): 20, 20s, 1m"
            if phases == "repeated"
            else "a pair's bursts on each side, about 0.5 s each, sent to both at once: 8, 8s, 1m"
        )
        + f" (default: {defaults.duration_s:g}s)",
    )
    load.add_argument(
        "--warmup",
        type=warmup,
        default=(defaults.warmup_s, defaults.warmup_requests),
        help="sent but not counted, before each phase: a duration (5s) or requests (100r) "
        f"(default: {defaults.warmup_s:g}s)",
    )
    if phases == "repeated":
        load.add_argument(
            "--repeats",
            type=positive_int,
            help=f"repeat the phases; the median run is reported with the spread (default: {defaults.repeats})",
        )
    add_defaulted(
        load,
        "--prompt-repeats",
        positive_int,
        defaults.prompt_repeats,
        "sentence repeats per prompt, as LiteLLM's load tests",
    )
    if phases == "repeated":
        load.add_argument(
            "--driver",
            choices=choices(Driver),
            default=defaults.driver,
            help=f"load client: perfkit's own or Locust with perfkit's user, its entries folded into the result "
            f"(default: {defaults.driver})",
        )
        add_defaulted(
            load, "--processes", positive_int, defaults.processes, "load-driver processes (Locust: its --processes)"
        )
        add_progress(load, defaults.progress)
    mock = p.add_argument_group("mock provider")
    add_defaulted(mock, "--ttft-ms", non_negative, defaults.ttft_ms, "the mock's time to first token")
    add_defaulted(mock, "--itl-ms", non_negative, defaults.itl_ms, "the mock's gap between chunks")
    add_defaulted(mock, "--chunks", positive_int, defaults.chunks, "content chunks per answer")
    return load


def load_options(args: argparse.Namespace, defaults: BenchOptions) -> BenchOptions:
    """``defaults`` with add_load_arguments' options."""
    return dataclasses.replace(
        defaults,
        concurrency=args.concurrency,
        stream_concurrency=getattr(args, "stream_concurrency", defaults.stream_concurrency),
        duration_s=args.duration,
        warmup_s=args.warmup[0],
        warmup_requests=args.warmup[1],
        repeats=getattr(args, "repeats", None) or defaults.repeats,
        prompt_repeats=args.prompt_repeats,
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        chunks=args.chunks,
        driver=getattr(args, "driver", defaults.driver),
        processes=getattr(args, "processes", defaults.processes),
        progress=getattr(args, "progress", defaults.progress),
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .._bench._options import MASTER_KEY, MODEL, PERTURBATION_PAIRS, PROVIDERS, BenchOptions

    defaults = BenchOptions()
    target = p.add_argument_group("what to measure (default: the LiteLLM proxy installed here)")
    target.add_argument(
        "--litellm-version",
        type=_list(str, "versions like 1.83.14,1.103.0"),
        help="build an isolated cached venv per version and sweep them",
    )
    target.add_argument("--proxy-command", help="run this gateway instead; {port} and {upstream} are filled in")
    target.add_argument(
        "--proxy-url", help="measure a gateway that is already running (no per-stage data unless it exports to perfkit)"
    )
    target.add_argument(
        "--config", help="a LiteLLM config to use instead of the embedded one; {upstream} is the mock's URL"
    )
    target.add_argument(
        "--model",
        help=f"the model the load asks for, with --config, --proxy-command or --proxy-url (default: {MODEL}, "
        "the embedded config's)",
    )
    add_api_key(
        target,
        MASTER_KEY,
        " (the embedded config's master key); with --config, --proxy-command or --proxy-url only",
    )
    target.add_argument(
        "--provider",
        choices=sorted(PROVIDERS),
        help=f"the provider path the embedded config's model takes to the mock (default: {defaults.provider}), to "
        "measure each path's overhead; aiohttp_openai cannot stream in LiteLLM (docs/litellm.md)",
    )
    target.add_argument(
        "--deployment",
        choices=choices(BenchDeployment),
        default=defaults.deployment,
        help="what runs beside the proxy, with --litellm-version: plain (default: a master key, nothing else); "
        "postgres (a private PostgreSQL: the load alternates the master key and a virtual key, request by request, "
        "and the bench compares their stages' CPU; LiteLLM tracks the spend); postgres+redis "
        "(and a private Redis for the router's state). LiteLLM's database client runs Prisma's wasm query engine "
        "under node (docs/bench.md)",
    )
    target.add_argument(
        "--instances",
        type=positive_int,
        default=defaults.instances,
        help="proxies, each under perfkit run with --workers workers, sharing the deployment's PostgreSQL and Redis; "
        f"the driver spreads its connections over them, the stage table joins them all (default: {defaults.instances})",
    )
    target.add_argument(
        "--scenario",
        choices=choices(BenchScenario),
        default=defaults.scenario,
        help="the embedded config: fake-endpoint (default: the benchmark page's one model at the mock), or "
        "rate-limited-deployments (the 1K-RPS guide's: two deployments of the model, each with --rpm, "
        "counted by the router per minute, in Redis across instances; beyond both, 429)",
    )
    add_defaulted(
        target,
        "--rpm",
        positive_int,
        defaults.rpm,
        "with --scenario rate-limited-deployments: each deployment's requests per minute",
    )
    target.add_argument(
        "--idle",
        type=duration,
        default=defaults.idle_s,
        help="after the repeats, one user for this long: the overhead a request pays on an idle proxy, "
        f"without queueing (default: {defaults.idle_s:g}s; 0 skips it)",
    )
    target.add_argument(
        "--workers",
        type=_list(int, "worker counts like 1,2"),
        default=defaults.workers,
        help=f"proxy workers; a list sweeps them (default: {','.join(map(str, defaults.workers))})",
    )
    target.add_argument(
        "--headline",
        choices=choices(BenchHeadline),
        default=defaults.headline,
        help="where RPS, latency and the proxy's CPU come from: plain (default: a proxy perfkit does not touch, "
        "the same LiteLLM, config and mock, taking turns in bursts with the one under perfkit run that gives the "
        "stages; perfkit's own cost is printed as a row), or recorded (the proxy under perfkit run, every request "
        "recorded, its cost included). A gateway the bench does not start, --deployment, --instances, --scenario "
        "and --driver locust keep recorded",
    )
    target.add_argument(
        "--perturbation",
        action="store_true",
        help="instead: what perfkit costs the proxy. The same proxy and config plain and under perfkit run, "
        f"in interleaved pairs (--repeats, default {PERTURBATION_PAIRS}): CPU per request and RPS, perfkit / plain, "
        "with 95%% intervals (schema perfkit.perturbation/1)",
    )
    target.add_argument(
        "--record-rate",
        type=record_rate,
        metavar="N|all",
        help=f"with --perturbation: perfkit run's --record-rate for the proxy under perfkit (default: "
        f"{DEFAULT_RECORD_RATE:g}, perfkit run's own; all: every request recorded). The bench itself records every request",
    )
    load = add_load_arguments(p, defaults)
    load.add_argument(
        "--direct-duration",
        type=_positive_duration,
        default=defaults.direct_duration_s,
        help="how long each phase straight to the mock (the baseline) measures, after 1 s unmeasured (less when this is shorter) "
        f"(default: {defaults.direct_duration_s:g}s)",
    )
    out = p.add_argument_group("output")
    out.add_argument(
        "--label", default=defaults.label, help=f"a name for this run, shown by compare (default: {defaults.label})"
    )
    out.add_argument(
        "--flamegraph",
        choices=choices(BenchFlamegraph),
        default=defaults.flamegraph,
        help="py-spy flamegraph of the proxy and its workers during the first repeat, beside --out (needs ptrace rights)",
    )
    out.add_argument("--out", default=OUT, help=f"result JSON (default: {OUT})")


def run(args: argparse.Namespace) -> int:
    from .._bench import BenchError, run_bench
    from .._bench._launch import StartError
    from .._bench._options import PERTURBATION_PAIRS, BenchOptions
    from .._bench._render import render_bench
    from .._bench._sweep_pairs import render_sweep_pairs

    def action() -> int:
        if args.proxy_url and (args.proxy_command or args.litellm_version):
            raise CliError(
                "--proxy-url measures a running gateway; do not combine it with --proxy-command or --litellm-version"
            )
        if args.config and not Path(args.config).is_file():
            raise CliError(f"--config {args.config}: no such file")
        if args.provider and (args.config or args.proxy_command or args.proxy_url):
            raise CliError(
                "--provider sets the embedded LiteLLM config's path to the mock; with --config, --proxy-command or --proxy-url, "
                "set the provider in that gateway's own config"
            )
        options = dataclasses.replace(
            load_options(args, BenchOptions()),
            litellm_versions=tuple(args.litellm_version or ()),
            proxy_command=args.proxy_command,
            proxy_url=args.proxy_url,
            config=args.config,
            provider=args.provider or BenchOptions().provider,
            workers=args.workers,
            idle_s=args.idle,
            direct_duration_s=args.direct_duration,
            label=args.label,
            flamegraph=args.flamegraph,
            deployment=args.deployment,
            instances=args.instances,
            scenario=args.scenario,
            rpm=args.rpm,
            headline=args.headline,
            flamegraph_prefix=str(Path(args.out).with_suffix("")),
            **_gateway(args),
        )
        if args.record_rate is not None and not args.perturbation:
            raise CliError(
                "--record-rate sets what --perturbation measures; the bench itself records every request to attribute them"
            )
        if args.perturbation and (
            args.deployment != "plain" or args.instances > 1 or args.scenario != BenchOptions().scenario
        ):
            raise CliError(
                "--perturbation measures one plain proxy; run --deployment, --instances and --scenario without it"
            )
        if args.perturbation:
            rate = args.record_rate or options.record_rate
            pairs = args.repeats or PERTURBATION_PAIRS
            return _perturbation(dataclasses.replace(options, repeats=pairs, record_rate=rate), args.out)
        try:
            document = run_bench(options)
        except (BenchError, StartError) as exc:
            raise CliError(str(exc)) from None
        _write(args.out, document)
        print(render_bench(document))
        sweep = _sweep_comparison(document)
        if sweep:
            print("\n" + sweep)
        if len(options.litellm_versions) > 1 and document["complete"]:
            document["sweep_pairs"] = _sweep_in_pairs(options)
            _write(args.out, document)
            print("\n" + render_sweep_pairs(document["sweep_pairs"]))
        print(f"\nwritten: {args.out}")
        return _incomplete(document, args.out)

    return run_command("bench", action)


def _gateway(args: argparse.Namespace) -> dict[str, Any]:
    """The model and key the load sends: the embedded config's, or a configured gateway's."""
    from .._bench._options import MASTER_KEY, MODEL

    if not (args.config or args.proxy_command or args.proxy_url):
        if args.model or args.api_key_file:
            raise CliError(
                f"--model and --api-key-file are for a gateway you configure (--config, --proxy-command or "
                f"--proxy-url); the embedded config serves {MODEL} with the key {MASTER_KEY}"
            )
        return {}
    if args.perturbation and (args.model or args.api_key_file):
        raise CliError(f"--perturbation sends {MODEL} with the key {MASTER_KEY}: drop --model and --api-key-file")
    return {"model": args.model or MODEL, "api_key": api_key(args, MASTER_KEY)}


def _perturbation(options: BenchOptions, out: str) -> int:
    from .._bench import BenchError
    from .._bench._launch import StartError
    from .._bench._perturbation import render_perturbation, run_perturbation

    try:
        document = run_perturbation(options)
    except (BenchError, StartError) as exc:
        raise CliError(str(exc)) from None
    _write(out, document)
    print(render_perturbation(document))
    print(f"\nwritten: {out}")
    return _incomplete(document, out)


def _write(out: str, document: Any) -> None:
    try:
        Path(out).write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    except OSError as exc:
        raise CliError(f"cannot write --out {out}: {exc.strerror}") from None


def _incomplete(document: Any, out: str) -> int:
    """0, or for a document a signal cut short: say so, and exit as that signal asks."""
    if document["complete"]:
        return 0
    stopped_by = document.get("stopped_by", "SIGINT")
    print(f"perfkit bench: stopped by {stopped_by}; {out} holds what was finished until then", file=sys.stderr)
    return 128 + int(signal.Signals[stopped_by])


def _sweep_in_pairs(options: BenchOptions) -> list[BenchSweepPairs]:
    """The sweep's CPU per request, each version against the first, in pairs (docs/bench.md)."""
    from .._bench import BenchError
    from .._bench._launch import StartError
    from .._bench._sweep_pairs import sweep_pairs

    try:
        return sweep_pairs(options, options.litellm_versions)
    except (BenchError, StartError) as exc:
        raise CliError(f"the sweep's pairs: {exc}") from None


def _sweep_comparison(document: Any) -> str | None:
    """A sweep ends with its comparison: the first run is the baseline."""
    from .._bench._compare import CompareError, render_sweep

    try:
        return render_sweep(document)
    except CompareError as exc:
        return f"no comparison of the runs: {exc}"
