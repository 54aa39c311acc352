"""Reading the docs' tables and code spans, for the tests that hold the docs to the code."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^```.*?^```$", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")


def prose(text: str) -> str:
    """A page without its fenced blocks (example output, not reference)."""
    return _FENCE.sub("", text)


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole heading line) up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = prose(text).splitlines()
    start = lines.index(heading) + 1
    end = next(
        (i for i in range(start, len(lines)) if re.match(rf"#{{1,{level}}} ", lines[i])),
        len(lines),
    )
    return "\n".join(lines[start:end])


def table_rows(text: str) -> list[list[str]]:
    """Every table body row's cells (the header row and the rule below it left out)."""
    rows: list[list[str]] = []
    previous = ""
    for line in prose(text).splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[-:| ]+\|", line) and previous.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        previous = line
    return rows


def spans(text: str) -> list[str]:
    """The code spans of some text, without their backticks."""
    return _SPAN.findall(text)
