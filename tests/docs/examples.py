"""The example outputs quoted in docs/bench.md, rendered from the runs kept in tests/docs/runs/.

Each quoted output in docs/bench.md is a ``text`` block right after a marker
that names its renderer and the run it renders (the document ``--out``
wrote, gzipped):

    <!-- example: bench tests/docs/runs/bench-1.103.0.json.gz -->

The block is that renderer's output for that document, exactly as the
command prints it. ``python -m tests.docs.examples`` rewrites every marked
block from the current renderers (after a renderer changes, or with a new
run kept here); tests/docs/test_bench_examples.py fails while a block
differs from what the current renderer makes of its run.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from litellm_perfkit._bench._perturbation import render_perturbation
from litellm_perfkit._bench._render import render_bench

ROOT = Path(__file__).resolve().parents[2]
BENCH_DOC = ROOT / "docs" / "bench.md"


# What `perfkit bench` prints for each kind of document (before its "written: FILE" line).
RENDERERS: dict[str, Callable[[Any], str]] = {
    "bench": render_bench,
    "perturbation": render_perturbation,
}

# A block's text never holds a fence, so a marked block cannot run on into the next one.
MARKED = re.compile(
    r"^<!-- example: (?P<kind>\w+) (?P<run>\S+) -->\n"
    r"```text\n(?:(?P<text>(?:[^`]|`(?!``))*?)\n)?```$",
    re.M,
)
TEXT_BLOCK = re.compile(r"^```text$", re.M)


def render(kind: str, run: str) -> str:
    """The output of ``kind``'s renderer for the document at ``run`` (relative to the repository)."""
    data = (ROOT / run).read_bytes()
    return RENDERERS[kind](orjson.loads(gzip.decompress(data) if run.endswith(".gz") else data))


def examples(doc: str) -> list[tuple[str, str, str]]:
    """(kind, run, quoted text) of every marked block."""
    return [(m["kind"], m["run"], m["text"] or "") for m in MARKED.finditer(doc)]


def refreshed(doc: str) -> str:
    """``doc`` with every marked block replaced by its renderer's current output."""
    return MARKED.sub(
        lambda m: f"<!-- example: {m['kind']} {m['run']} -->\n```text\n{render(m['kind'], m['run'])}\n```", doc
    )


def main() -> None:
    doc = BENCH_DOC.read_text()
    new = refreshed(doc)
    if new != doc:
        BENCH_DOC.write_text(new)
    print(
        f"{BENCH_DOC.relative_to(ROOT)}: {len(examples(new))} examples, {'rewritten' if new != doc else 'up to date'}"
    )


if __name__ == "__main__":
    main()
