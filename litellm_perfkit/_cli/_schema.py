"""``perfkit schema load|bench``: the JSON Schema of a result document."""

from __future__ import annotations

import argparse

import orjson

from .._wire._schema import DOCUMENTS, json_schema
from ._common import run_command

HELP = "print the JSON Schema of a result document (perfkit load --out, perfkit bench --out, perfkit bench --perturbation --out)"
DESCRIPTION = """\
Prints the JSON Schema (draft 2020-12) that perfkit's result documents follow,
generated from their declarations (litellm_perfkit.types.LoadResult and
BenchResult). The same schemas are in docs/schemas/.

examples:
  perfkit schema load > load.schema.json
  perfkit schema bench | jq '.["$defs"].BenchStage'
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "document",
        choices=sorted(DOCUMENTS),
        help="which document: load (perfkit.load/1), bench (perfkit.bench/1) or perturbation (perfkit.perturbation/1)",
    )


def run(args: argparse.Namespace) -> int:
    def action() -> int:
        print(render(args.document), end="")
        return 0

    return run_command("schema", action)


def render(document: str) -> str:
    """The schema as written to docs/schemas/ (indented, keys in declaration order, a final newline)."""
    return orjson.dumps(json_schema(document), option=orjson.OPT_INDENT_2).decode() + "\n"
