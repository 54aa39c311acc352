"""Every example output quoted in docs/bench.md is what the current renderer makes of a kept run."""

from __future__ import annotations

import pytest

from tests.docs.examples import BENCH_DOC, MARKED, ROOT, TEXT_BLOCK, examples, render

DOC = BENCH_DOC.read_text()


def test_every_text_block_in_bench_md_is_a_marked_example() -> None:
    marked, blocks = len(MARKED.findall(DOC)), len(TEXT_BLOCK.findall(DOC))
    assert marked == blocks, (
        f"docs/bench.md has {blocks} text blocks and {marked} of them follow an '<!-- example: KIND RUN -->' "
        "marker: quote output only from a run kept in tests/docs/runs/ (tests/docs/examples.py)"
    )
    assert marked >= 2  # the default run, the perturbation run


@pytest.mark.parametrize(
    ("kind", "run", "quoted"), [pytest.param(*e, id=f"{e[0]}:{e[1].rsplit('/', 1)[-1]}") for e in examples(DOC)]
)
def test_the_quoted_output_is_the_current_renderers(kind: str, run: str, quoted: str) -> None:
    assert (ROOT / run).is_file(), f"docs/bench.md quotes {run}, which is not kept"
    assert quoted == render(kind, run), (
        f"docs/bench.md's {kind} example differs from what the current renderer makes of {run}: "
        "python -m tests.docs.examples rewrites it (and say in the text what changed, if the figures did)"
    )


def test_a_marked_block_ends_at_its_own_fence() -> None:
    doc = "<!-- example: bench a.json -->\n```text\n```\n\nprose\n\n```text\nnot an example\n```\n"
    assert examples(doc) == [("bench", "a.json", "")]
    assert len(MARKED.findall(doc)) < len(TEXT_BLOCK.findall(doc))
