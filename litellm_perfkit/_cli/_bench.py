"""``perfkit bench``: mock + proxy + load + spans, one command."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .._bench._options import PROVIDERS
from .._wire._record_rate import DEFAULT_RECORD_RATE
from ._common import CliError, duration, non_negative, positive_int, record_rate, run_command, warmup

if TYPE_CHECKING:
    from .._bench import BenchOptions

HELP = "measure what the LiteLLM proxy adds, and where inside it the time goes"
DESCRIPTION = """\
Runs the whole overhead experiment: starts the mock provider and measures it
directly; starts the LiteLLM proxy installed here under `perfkit run` with an
embedded config, its spans exported to an embedded receiver; warms up; runs a
non-streaming and a streaming phase; joins the proxy's spans to the client's
records by trace id; stops everything; prints the results and writes JSON.

Results: RPS and latency, client-observed overhead (proxy minus direct),
x-litellm-overhead-duration-ms, TTFT and the TTFT the proxy adds, full-stream
time, each stage's p50/p95 and share of the overhead with the unattributed
remainder, the fast paths taken, and the proxy's CPU and RSS. See docs/bench.md.

examples:
  perfkit bench
  perfkit bench --litellm-version 1.83.14,1.103.0 --out sweep.json
  perfkit bench --workers 2 --repeats 3 --label my-change
  perfkit bench --workers 1,2 --driver locust --processes 2
  perfkit bench --flamegraph speedscope     # then: perfkit report perfkit-bench.json --out report.html
  perfkit bench --proxy-command "python my_gateway.py --port {port} --upstream {upstream}"
  perfkit bench --perturbation --litellm-version 1.103.0 --out perturbation.json
"""


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


def add_load_arguments(p: argparse.ArgumentParser, duration_default: float, concurrency_default: int) -> None:
    """The load and mock options of a bench (bench, bisect)."""
    load = p.add_argument_group("load")
    load.add_argument(
        "--concurrency",
        type=positive_int,
        default=concurrency_default,
        help=f"users in the non-streaming phase (default: {concurrency_default})",
    )
    load.add_argument(
        "--stream-concurrency", type=positive_int, default=10, help="users in the streaming phase (default: 10)"
    )
    load.add_argument(
        "--duration",
        type=duration,
        default=duration_default,
        help=f"how long each proxy phase measures: 20, 20s, 1m (default: {duration_default:g}s)",
    )
    load.add_argument(
        "--warmup",
        type=warmup,
        default=(5.0, 0),
        help="sent but not counted, before each phase: a duration (5s) or requests (100r) (default: 5s)",
    )
    load.add_argument(
        "--repeats",
        type=positive_int,
        help="repeat the phases; the median run is reported with the spread (default: 1; with --perturbation, the pairs: 8)",
    )
    load.add_argument(
        "--prompt-repeats",
        type=positive_int,
        default=150,
        help="sentence repeats per prompt, as LiteLLM's load tests (default: 150)",
    )
    load.add_argument(
        "--driver",
        choices=["perfkit", "locust"],
        default="perfkit",
        help="load client: perfkit's own (default) or Locust with perfkit's user; its entries are folded into the result",
    )
    load.add_argument(
        "--processes", type=positive_int, default=1, help="load-driver processes (Locust: its --processes)"
    )
    mock = p.add_argument_group("mock provider")
    mock.add_argument("--ttft-ms", type=non_negative, default=20.0, help="the mock's time to first token (default: 20)")
    mock.add_argument("--itl-ms", type=non_negative, default=2.0, help="the mock's gap between chunks (default: 2)")
    mock.add_argument("--chunks", type=positive_int, default=20, help="content chunks per answer (default: 20)")


def load_options(args: argparse.Namespace) -> dict[str, Any]:
    """BenchOptions' fields from add_load_arguments' options."""
    return dict(
        concurrency=args.concurrency,
        stream_concurrency=args.stream_concurrency,
        duration_s=args.duration,
        warmup_s=args.warmup[0],
        warmup_requests=args.warmup[1],
        repeats=args.repeats or 1,
        prompt_repeats=args.prompt_repeats,
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        chunks=args.chunks,
        driver=args.driver,
        processes=args.processes,
        progress=args.progress,
    )


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
        "--provider",
        choices=sorted(PROVIDERS),
        help="the provider path the embedded config's model takes to the mock (default: openai), to measure "
        "each path's overhead; aiohttp_openai cannot stream in LiteLLM (docs/litellm.md)",
    )
    target.add_argument(
        "--idle",
        type=duration,
        default=5.0,
        help="after the repeats, one user for this long: the overhead a request pays on an idle proxy, "
        "without queueing (default: 5s; 0 skips it)",
    )
    target.add_argument(
        "--workers",
        type=_list(int, "worker counts like 1,2"),
        default=(1,),
        help="proxy workers; a list sweeps them (default: 1)",
    )
    target.add_argument(
        "--perturbation",
        action="store_true",
        help="instead: what perfkit costs the proxy. The same proxy and config plain and under perfkit run, "
        "in interleaved pairs (--repeats, default 8): CPU per request and RPS, perfkit / plain, with "
        "95%% intervals (schema perfkit.perturbation/1)",
    )
    target.add_argument(
        "--record-rate",
        type=record_rate,
        metavar="N|all",
        help=f"with --perturbation: perfkit run's --record-rate for the proxy under perfkit (default: "
        f"{DEFAULT_RECORD_RATE:g}, perfkit run's own; all: every request recorded). The bench itself records every request",
    )
    add_load_arguments(p, duration_default=20.0, concurrency_default=20)
    out = p.add_argument_group("output")
    out.add_argument("--label", default="bench", help="a name for this run (shown by compare)")
    out.add_argument(
        "--flamegraph",
        choices=["off", "speedscope", "svg"],
        default="off",
        help="py-spy flamegraph of the proxy and its workers during the first repeat, beside --out (needs ptrace rights)",
    )
    out.add_argument("--out", default="perfkit-bench.json", help="result JSON (default: perfkit-bench.json)")
    out.add_argument(
        "--progress", choices=["auto", "on", "off"], default="auto", help="progress bars (auto: on a terminal)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._bench import BenchError, BenchOptions, run_bench
    from .._bench._launch import StartError
    from .._bench._render import render_bench

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
        options = BenchOptions(
            litellm_versions=tuple(args.litellm_version or ()),
            proxy_command=args.proxy_command,
            proxy_url=args.proxy_url,
            config=args.config,
            provider=args.provider or "openai",
            workers=args.workers,
            idle_s=args.idle,
            label=args.label,
            flamegraph=args.flamegraph,
            flamegraph_prefix=str(Path(args.out).with_suffix("")),
            **load_options(args),
        )
        if args.record_rate is not None and not args.perturbation:
            raise CliError(
                "--record-rate sets what --perturbation measures; the bench itself records every request to attribute them"
            )
        if args.perturbation:
            rate = args.record_rate or options.record_rate
            return _perturbation(dataclasses.replace(options, repeats=args.repeats or 8, record_rate=rate), args.out)
        try:
            document = run_bench(options)
        except (BenchError, StartError) as exc:
            raise CliError(str(exc)) from None
        _write(args.out, document)
        print(render_bench(document))
        sweep = _sweep_comparison(document)
        if sweep:
            print("\n" + sweep)
        print(f"\nwritten: {args.out}")
        return _incomplete(document, args.out)

    return run_command("bench", action)


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


def _sweep_comparison(document: Any) -> str | None:
    """A sweep ends with its comparison: the first run is the baseline."""
    from .._bench._compare import CompareError, render_sweep

    try:
        return render_sweep(document)
    except CompareError as exc:
        return f"no comparison of the runs: {exc}"
