"""``perfkit bisect``: the release, and the stage, that made the proxy slower."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path

from ._bench import add_load_arguments, load_options
from ._common import CliError, duration, fraction, positive_int, run_command

HELP = "find the releases where the proxy got slower (or faster), the stages and the functions that moved"
DESCRIPTION = """\
Measures releases between a good and a bad version in pairs: both releases'
proxies up together against one mock, sent bursts of an exact
number of requests at once, the CPU of each read around its bursts. Each comparison
gets as many pairs as resolve --resolution with the pair noise measured so
far; a range whose ratio's interval excludes 1 is split and both halves are
compared, widest first, until the budget or the resolution is reached. For
each release found: the ratio and the difference with intervals, the stages
whose own CPU moved, and, from per-stage profiles of more pairs, the functions
in them whose CPU per request moved. Every pair goes to --out, the journal,
at once, and to a store under $PERFKIT_CACHE_DIR that later bisects and
sweeps of the same releases and settings reuse. See docs/bisect.md.

examples:
  perfkit bisect --good 1.86.5 --bad 1.90.2 --budget 45m
  perfkit bisect --good 1.83.14 --bad 1.103.0 --resolution 2% --budget 2h
  perfkit bisect --package my-gateway --good 2.0.0 --bad 2.3.1 \\
      --proxy-command "{python} -m my_gateway --port {port} --upstream {upstream}"
"""


OUT = "perfkit-bisect.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .._bench._bisect import MAX_PAIRS, MIN_CHANGE, MIN_PAIRS, RESOLUTION
    from .._bench._bisect_bench import BISECT_BENCH, METRIC, METRICS, PROFILED_PAIRS

    what = p.add_argument_group("what to bisect")
    what.add_argument("--good", required=True, help="a release that was fast, e.g. 1.83.14")
    what.add_argument("--bad", required=True, help="a release that is slow, e.g. 1.103.0")
    what.add_argument(
        "--package",
        default="litellm",
        help="the package whose releases are measured (default: litellm, each in its cached venv); another package "
        "is installed per release without dependencies and run with --proxy-command",
    )
    what.add_argument(
        "--proxy-command",
        help="for --package other than litellm: the gateway's command; {python}, {port}, {upstream} are filled in",
    )
    what.add_argument(
        "--pip-args", default="", help="extra pip arguments to list and install releases, e.g. '--find-links ./dist'"
    )
    what.add_argument("--pre", action="store_true", help="include pre-releases between the two ends")
    what.add_argument(
        "--metric",
        choices=list(METRICS),
        default=METRIC,
        help=f"what to bisect on (default: {METRIC}, the steadiest): "
        + "; ".join(f"{name}: {what} ({unit})" for name, (what, unit) in METRICS.items()),
    )
    search = p.add_argument_group("search")
    search.add_argument(
        "--budget", type=duration, help="stop after this much time (30m, 2h); the answer is then the ranges left"
    )
    search.add_argument(
        "--resolution",
        type=fraction,
        default=RESOLUTION,
        help=f"the relative step each comparison should resolve at 95%%: chooses its number of pairs from the pair "
        f"noise measured (default: {RESOLUTION * 100:g}%%)",
    )
    search.add_argument(
        "--min-pairs",
        type=positive_int,
        default=MIN_PAIRS,
        help=f"pairs per comparison at least (default: {MIN_PAIRS})",
    )
    search.add_argument(
        "--max-pairs",
        type=positive_int,
        default=MAX_PAIRS,
        help=f"pairs per comparison at most, while its interval holds 1 and is wider than --resolution "
        f"(default: {MAX_PAIRS})",
    )
    search.add_argument(
        "--min-change",
        type=fraction,
        default=MIN_CHANGE,
        help=f"the smallest change worth naming, relative, beyond its interval excluding no change: 0.05 or 5%% "
        f"(default: {MIN_CHANGE * 100:g}%%)",
    )
    search.add_argument(
        "--functions",
        choices=["profile", "off"],
        default="profile",
        help=f"for each release found, {PROFILED_PAIRS} more pairs with the per-stage profiler on, and the functions "
        "that moved, those in the stages that moved first (default: profile)",
    )
    search.add_argument(
        "--out",
        default=OUT,
        help=f"the journal: every measurement, and the answer; a rerun resumes from it (default: {OUT})",
    )
    add_load_arguments(p, BISECT_BENCH, phases="pairs")


def _checked_pip_args(args: argparse.Namespace) -> list[str]:
    """The options that must agree with each other; ``--pip-args`` split as a shell would."""
    if args.package != "litellm" and not args.proxy_command:
        raise CliError(
            f'--package {args.package} needs --proxy-command to run it, e.g. "{{python}} -m my_gateway --port {{port}} --upstream {{upstream}}"'
        )
    if args.package == "litellm" and args.proxy_command:
        raise CliError(
            "--proxy-command is for --package other than litellm; LiteLLM runs from its cached venv per release"
        )
    if args.min_pairs > args.max_pairs:
        raise CliError(f"--min-pairs {args.min_pairs} is more than --max-pairs {args.max_pairs}")
    if not 0 < args.resolution < 1:
        raise CliError(f"--resolution {args.resolution:.0%}: give a step such as 3%")
    try:
        return shlex.split(args.pip_args)
    except ValueError as exc:
        raise CliError(f"--pip-args: {exc}") from None


def _journal_settings(args: argparse.Namespace, pairs: dict[str, object]) -> dict[str, object]:
    """What a journal's search depends on: a rerun with other settings starts afresh."""
    return {
        **pairs,
        "metric": args.metric,
        "good": args.good,
        "bad": args.bad,
        "pre": args.pre,
        "resolution": args.resolution,
        "min_pairs": args.min_pairs,
        "max_pairs": args.max_pairs,
        "min_change": args.min_change,
    }


def _say(message: str) -> None:
    print(f"perfkit bisect: {message}", file=sys.stderr, flush=True)


def _releases(args: argparse.Namespace, pip_args: list[str]) -> list[str]:
    from .._bench._bisect import releases_between
    from .._bench._releases import available_versions
    from .._bench._venvs import VenvError

    try:
        versions = releases_between(available_versions(args.package, pip_args), args.good, args.bad, args.pre)
    except (ValueError, VenvError) as exc:
        raise CliError(str(exc)) from None
    if len(versions) < 2 or args.good == args.bad:
        raise CliError(f"--good {args.good} and --bad {args.bad} must be two different releases of {args.package}")
    return versions


def _bisect(args: argparse.Namespace) -> int:
    from .._bench._bisect import bisect
    from .._bench._bisect_bench import (
        BISECT_BENCH,
        measure_with_pairs,
        prepare_release,
        profile_functions,
        render_bisect,
    )
    from .._bench._bisect_journal import Journal
    from .._bench._launch import StartError
    from .._bench._options import BenchError
    from .._bench._pair_store import STORE_NAME, PairStore, pair_settings
    from .._bench._pairs import Unavailable
    from .._bench._venvs import CACHE

    pip_args = _checked_pip_args(args)
    versions = _releases(args, pip_args)
    options = dataclasses.replace(load_options(args, BISECT_BENCH), proxy_command=args.proxy_command)
    settings = pair_settings(options, args.package, pip_args)
    try:
        journal = Journal.open(Path(args.out), _journal_settings(args, settings))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    finished = journal.load_result()
    if finished is not None and finished["complete"]:
        _say(
            f"{args.out} holds a complete answer for these settings; remove it (or choose another --out) to measure again"
        )
        print(render_bisect(finished, versions, args.package))
        return 0
    store = PairStore(CACHE / STORE_NAME, settings)
    resumed = sum(len(pairs) for pairs in journal.pairs.values())
    _say(
        f"{len(versions)} releases of {args.package} from {versions[0]} to {versions[-1]}"
        + (f"; resuming {args.out} ({resumed} pairs)" if resumed else "")
    )
    try:
        result = bisect(
            versions,
            measure_with_pairs(options, args.package, pip_args, store.add),
            journal,
            metric=args.metric,
            budget_s=args.budget,
            target=args.resolution,
            min_pairs=args.min_pairs,
            max_pairs=args.max_pairs,
            min_change=args.min_change,
            known=store.known(),
            prepare=prepare_release(args.package, pip_args, _say),
            profile=profile_functions(options, args.package, pip_args) if args.functions == "profile" else None,
            say=_say,
        )
    except (BenchError, StartError) as exc:
        raise CliError(f"{exc} (pairs measured so far are in {args.out}; rerun to resume)") from None
    except Unavailable as exc:  # an end of the range: nothing to compare with
        raise CliError(f"an end of the range cannot be measured: {exc}; choose another --good or --bad") from None
    print(render_bisect(result, versions, args.package))
    print(f"\nwritten: {args.out}")
    return 0


def run(args: argparse.Namespace) -> int:
    return run_command("bisect", lambda: _bisect(args))
