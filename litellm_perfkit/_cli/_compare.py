"""``perfkit compare A.json B.json [...]``: is B faster, slower, or the same?"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._common import CliError, fraction, run_command

if TYPE_CHECKING:
    from ..types import BenchResult

# argparse %-formats help strings: a bare "%" would break `perfkit --help`.
HELP = "compare bench results: deltas with bootstrap 95%% intervals, noise or real"
DESCRIPTION = """\
Compares each result file with the first (the baseline): latency, TTFT, full
stream, server-side overhead, every stage's time and its CPU per request,
each with a bootstrap 95% interval of the difference. A difference whose
interval contains zero is marked noise. RPS intervals come from --repeats of
the bench. One file of a sweep (several versions or worker counts) compares
its runs, the first one the baseline.

With --fail-above F the exit code is 1 when any metric got worse by more
than F (a fraction: 0.05 or 5%) and the interval excludes zero: for CI.

With --live the arguments are LiteLLM versions: each against the first, CPU
per non-streaming request measured in pairs (both proxies up together,
sent bursts at once; perfkit bisect's pairs, reused from and kept in
$PERFKIT_CACHE_DIR/pairs.jsonl) until the ratio is within ±3% (6 to 12 pairs).

examples:
  perfkit compare --live 1.83.14 1.103.0
  perfkit compare main.json my-branch.json
  perfkit compare main.json my-branch.json --fail-above 5%
  perfkit compare sweep.json        (perfkit bench --litellm-version 1.83.14,1.103.0)
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "results",
        nargs="+",
        help="perfkit bench result files, the first the baseline; or one sweep's file; with --live, LiteLLM versions",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="measure the LiteLLM versions given, in pairs, instead of reading result files",
    )
    p.add_argument(
        "--fail-above",
        type=fraction,
        metavar="F",
        help="exit 1 when a metric got really worse by more than this fraction: 0.05 or 5%%",
    )


def load_results(paths: list[str]) -> list[BenchResult]:
    from .._bench import BenchError, read_result

    try:
        return [read_result(path) for path in paths]
    except BenchError as exc:
        raise CliError(str(exc)) from None


def _live(versions: list[str]) -> int:
    from .._bench import BenchError
    from .._bench._launch import StartError
    from .._bench._options import BenchOptions
    from .._bench._sweep_pairs import render_sweep_pairs, sweep_pairs

    if len(versions) < 2:
        raise CliError("--live compares LiteLLM versions: give two or more, the baseline first (1.83.14 1.103.0)")
    try:
        print(render_sweep_pairs(sweep_pairs(BenchOptions(), tuple(versions))))
    except (BenchError, StartError) as exc:
        raise CliError(str(exc)) from None
    return 0


def run(args: argparse.Namespace) -> int:
    from .._bench._compare import CompareError, compare, regressions, render_compare, render_sweep, repeat_counts

    def action() -> int:
        if args.live:
            return _live(args.results)
        documents = load_results(args.results)
        if len(documents) == 1:
            sweep = render_sweep(documents[0])
            if sweep is None:
                raise CliError(
                    f"{args.results[0]} holds one run: give a second result file to compare with (the baseline first)"
                )
            print(sweep)
            return 0
        baseline = documents[0]
        failed = []
        for path, document in zip(args.results[1:], documents[1:]):
            try:
                deltas = compare(baseline, document)
            except CompareError as exc:
                raise CliError(f"{path}: {exc}") from None
            print(
                render_compare(
                    baseline.get("label", args.results[0]),
                    document.get("label", path),
                    deltas,
                    repeat_counts(baseline, document),
                )
            )
            print()
            if args.fail_above is not None:
                failed += regressions(deltas, args.fail_above)
        if failed:
            names = ", ".join(f"{d.metric} {d.relative:+.1%}" for d in failed)
            print(f"perfkit compare: regression beyond {args.fail_above * 100:g}%: {names}")
            return 1
        return 0

    return run_command("compare", action)
