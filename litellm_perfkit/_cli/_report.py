"""``perfkit report run.json [more.json] --out report.html``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ._common import CliError, run_command
from ._compare import load_results

if TYPE_CHECKING:
    pass

HELP = "draw bench results as one self-contained HTML file"
DESCRIPTION = """\
Latency CDFs, a TTFT histogram, where the overhead went (a stage waterfall and
its table), and A/B bars when several results are given; for a perfkit
bisect journal, the metric per release with its interval and the changes
found. One HTML file with inline SVG: no scripts, no network, opens anywhere.

examples:
  perfkit report perfkit-bench.json --out report.html
  perfkit report main.json my-branch.json --out ab.html
  perfkit report perfkit-bisect.json --out bisect.html
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", help="perfkit bench result files, and perfkit bisect journals")
    p.add_argument("--out", required=True, help="the HTML file to write")


def _is_bisect_journal(path: str) -> bool:
    from .._bench._bisect_journal import BISECT_SCHEMA

    try:
        return bool(orjson.loads(Path(path).read_bytes()).get("schema") == BISECT_SCHEMA)
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return False  # read_result says what is wrong with it


def run(args: argparse.Namespace) -> int:
    from .._bench._report import render_html

    def action() -> int:
        journals = [path for path in args.results if _is_bisect_journal(path)]
        results = [path for path in args.results if path not in journals]
        documents = [(str(d.get("label") or path), d) for path, d in zip(results, load_results(results))]
        bisections = [(path, orjson.loads(Path(path).read_bytes())) for path in journals]
        try:
            Path(args.out).write_text(
                render_html(documents, base=Path(args.out).resolve().parent, bisections=bisections)
            )
        except OSError as exc:
            raise CliError(f"cannot write --out {args.out}: {exc.strerror}") from None
        print(f"written: {args.out}")
        return 0

    return run_command("report", action)
