"""The docs are a reference, not a journal: no dated entries, and every measured table in
docs/overhead.md comes after the command that makes it and the line saying what it was made with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.commands import PAGES, ROOT

# Dated history goes in CHANGELOG.md; a figure's provenance is its commit and load ("Made with").
_DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bad[ -]hoc\b", re.I)
_COMMAND = re.compile(r"python3? -m benchmarks\.\w+|`perfkit \w+")
OVERHEAD = ROOT / "docs" / "overhead.md"


@pytest.mark.parametrize("page", [p for p in PAGES if p.parent.name == "docs"], ids=lambda p: p.name)
def test_no_doc_page_is_dated(page: Path) -> None:
    dated = [
        f"{page.name}:{number}: {line.strip()}"
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if _DATED.search(line)
    ]
    assert not dated, "dated or ad-hoc passages (history goes in CHANGELOG.md):\n" + "\n".join(dated)


def _tables(markdown: str) -> list[tuple[str, str]]:
    """Each table's heading and the text of its section before it."""
    found: list[tuple[str, str]] = []
    heading, before, in_table = "", list[str](), False
    for line in markdown.splitlines():
        if line.startswith("#"):
            heading, before, in_table = line, [], False
        elif line.startswith("|"):
            if not in_table:
                found.append((heading, "\n".join(before)))
            in_table = True
        else:
            in_table = False
            before.append(line)
    return found


def test_overhead_has_tables() -> None:
    assert len(_tables(OVERHEAD.read_text())) >= 12


_MEASURED = [t for t in _tables(OVERHEAD.read_text()) if "at a glance" not in t[0]]


@pytest.mark.parametrize(
    ("heading", "before"), _MEASURED, ids=[f"{i}:{h.lstrip('# ')[:40]}" for i, (h, _) in enumerate(_MEASURED)]
)
def test_every_table_in_overhead_follows_its_command_and_what_it_was_made_with(heading: str, before: str) -> None:
    assert _COMMAND.search(before), f"docs/overhead.md, {heading}: a table with no command before it in its section"
    assert "Made with" in before or "made with" in before, (
        f"docs/overhead.md, {heading}: a table with no 'Made with' line (commit, version, load) before it"
    )


def test_every_figure_at_a_glance_links_to_its_section() -> None:
    text = OVERHEAD.read_text()
    glance = text.split("## The figures at a glance", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in glance.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert rows
    anchors = {
        re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", text, re.M)
    }
    for row in rows:
        links = re.findall(r"\]\(#([\w-]+)\)", row)
        assert links and all(link in anchors for link in links), f"docs/overhead.md at a glance: {row[:80]}"
