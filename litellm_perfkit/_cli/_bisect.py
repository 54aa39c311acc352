"""``perfkit bisect``: the release, and the stage, that made the proxy slower."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path

from ._bench import add_load_arguments, load_options
from ._common import CliError, duration, fraction, positive_int, run_command

HELP = "find the releases where the proxy got slower (or faster), and the stages that moved"
DESCRIPTION = """\
Measures releases between a good and a bad version with perfkit bench, and
bisects: each release measured is compared with the two ends of the range it
sits in, by intervals (a release measured again until it clearly looks like
one end, up to --max-samples). A regression that came in several steps is
found step by step. For each release found: the size of the change with its
interval, the stages whose self time moved, and the fast paths that changed.
Every measurement goes to --out, the journal, at once; run the same command
again to resume. See docs/bisect.md.

examples:
  perfkit bisect --good 1.83.14 --bad 1.103.0
  perfkit bisect --good 1.83.14 --bad 1.103.0 --metric rps --budget 2h
  perfkit bisect --package my-gateway --good 2.0.0 --bad 2.3.1 \\
      --proxy-command "{python} -m my_gateway --port {port} --upstream {upstream}"
"""


OUT = "perfkit-bisect.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .._bench._bisect import MAX_SAMPLES, MIN_CHANGE, MIN_SAMPLES
    from .._bench._bisect_bench import BISECT_BENCH, METRIC, METRICS

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
        + "; ".join(f"{name}: {what} ({unit})" for name, (what, unit, _) in METRICS.items()),
    )
    search = p.add_argument_group("search")
    search.add_argument(
        "--budget", type=duration, help="stop after this much time (30m, 2h); the answer is then the releases left"
    )
    search.add_argument(
        "--min-samples",
        type=positive_int,
        default=MIN_SAMPLES,
        help=f"bench runs per release at least (default: {MIN_SAMPLES})",
    )
    search.add_argument(
        "--max-samples",
        type=positive_int,
        default=MAX_SAMPLES,
        help=f"bench runs per release at most, when it is unclear (default: {MAX_SAMPLES})",
    )
    search.add_argument(
        "--min-change",
        type=fraction,
        default=MIN_CHANGE,
        help=f"the smallest change worth naming, relative: 0.05 or 5%% (default: {MIN_CHANGE * 100:g}%%); two runs of "
        "the same release differ by a few percent",
    )
    search.add_argument(
        "--out",
        default=OUT,
        help=f"the journal: every measurement, and the answer; a rerun resumes from it (default: {OUT})",
    )
    add_load_arguments(p, BISECT_BENCH)


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
    if args.min_samples > args.max_samples:
        raise CliError(f"--min-samples {args.min_samples} is more than --max-samples {args.max_samples}")
    try:
        return shlex.split(args.pip_args)
    except ValueError as exc:
        raise CliError(f"--pip-args: {exc}") from None


def _journal_settings(args: argparse.Namespace) -> dict[str, object]:
    """What a journal's measurements depend on: a rerun with other settings starts afresh."""
    return {
        "package": args.package,
        "metric": args.metric,
        "good": args.good,
        "bad": args.bad,
        "pre": args.pre,
        "proxy_command": args.proxy_command,
        "concurrency": args.concurrency,
        "duration_s": args.duration,
        "stream_concurrency": args.stream_concurrency,
        "ttft_ms": args.ttft_ms,
        "itl_ms": args.itl_ms,
        "chunks": args.chunks,
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
    from .._bench._bisect import Journal, Unavailable, bisect
    from .._bench._bisect_bench import BISECT_BENCH, measure_with_bench, render_bisect
    from .._bench._launch import StartError
    from .._bench._options import BenchError

    pip_args = _checked_pip_args(args)
    versions = _releases(args, pip_args)
    options = dataclasses.replace(load_options(args, BISECT_BENCH), proxy_command=args.proxy_command)
    try:
        journal = Journal.open(Path(args.out), _journal_settings(args))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    finished = journal.load_result()
    if finished is not None and finished["complete"]:
        _say(
            f"{args.out} holds a complete answer for these settings; remove it (or choose another --out) to measure again"
        )
        print(render_bisect(finished, versions, args.metric, args.package))
        return 0
    resumed = sum(len(samples) for samples in journal.samples.values())
    _say(
        f"{len(versions)} releases of {args.package} from {versions[0]} to {versions[-1]}"
        + (f"; resuming {args.out} ({resumed} measurements)" if resumed else "")
    )
    measure = measure_with_bench(options, args.package, args.metric, pip_args)
    try:
        result = bisect(
            versions,
            measure,
            journal,
            budget_s=args.budget,
            min_samples=args.min_samples,
            max_samples=args.max_samples,
            min_change=args.min_change,
            say=_say,
        )
    except (BenchError, StartError) as exc:
        raise CliError(f"{exc} (measurements so far are in {args.out}; rerun to resume)") from None
    except Unavailable as exc:  # an end of the range: nothing to compare with
        raise CliError(f"an end of the range cannot be measured: {exc}; choose another --good or --bad") from None
    print(render_bisect(result, versions, args.metric, args.package))
    print(f"\nwritten: {args.out}")
    return 0


def run(args: argparse.Namespace) -> int:
    return run_command("bisect", lambda: _bisect(args))
