"""Every link between the docs points at a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.commands import ROOT

PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (?P<title>.+)$", re.M)
_FENCE = re.compile(r"^```.*?^```$", re.M | re.S)


def anchor(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {anchor(m["title"]) for m in _HEADING.finditer(_FENCE.sub("", page.read_text()))}


def links() -> list[tuple[Path, str]]:
    found = []
    for page in PAGES:
        for match in _LINK.finditer(_FENCE.sub("", page.read_text())):
            target = match["target"]
            if not re.match(r"[a-z]+:", target):  # not http:, mailto:
                found.append((page, target))
    return found


def test_a_heading_gets_githubs_anchor() -> None:
    assert anchor("Where `perfkit run`'s cost goes: each part left out") == (
        "where-perfkit-runs-cost-goes-each-part-left-out"
    )
    assert anchor("`x-litellm-overhead-duration-ms` vs `x-perfkit-overhead-ms`") == (
        "x-litellm-overhead-duration-ms-vs-x-perfkit-overhead-ms"
    )


@pytest.mark.parametrize(("page", "target"), links(), ids=lambda value: getattr(value, "name", value))
def test_every_link_between_the_docs_resolves(page: Path, target: str) -> None:
    path, _, fragment = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    assert linked.exists(), f"{page.name} links to {target}: no such file"
    if fragment and linked.suffix == ".md":
        assert fragment in anchors(linked), f"{page.name} links to {target}: {linked.name} has no such heading"
