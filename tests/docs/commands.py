"""The commands the docs cite, as written in their code: `perfkit ...` and `python -m benchmarks....`.

CHANGELOG.md is history, whose commands were those of their day; every other
page describes today's tools, so its commands must run today.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)
_SPAN = re.compile(r"`((?:[^`\n]|\n(?!\s*\n))+)`")  # a span may wrap onto the next line of its paragraph
_INDENTED = re.compile(r"^(?: {4}|\t)(\S.*)$", re.M)
_COMMAND = re.compile(r"(?:^|(?<=[\s(=]))(?:\.venv/bin/)?(?:perfkit|python3? -m benchmarks\.(?P<module>\w+))(?=\s|$)")
_SUBSTITUTION = re.compile(r"\$\([^)]*\)")
_END = {"--", "|", "&&", ";", ">", "2>", "#"}
_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*(?:=.*)?$")


@dataclass(frozen=True)
class Command:
    page: str
    text: str
    module: str | None  # the benchmark; None for perfkit
    words: tuple[str, ...]  # after `perfkit` or the module, up to the end of the command

    @property
    def subcommand(self) -> str | None:
        return self.words[0] if self.module is None and self.words and not self.words[0].startswith("-") else None

    @property
    def flags(self) -> list[str]:
        return [word.split("=", 1)[0] for word in self.words if _FLAG.match(word)]

    def value(self, flag: str) -> str | None:
        for i, word in enumerate(self.words):
            if word == flag and i + 1 < len(self.words):
                return self.words[i + 1]
            if word.startswith(flag + "="):
                return word.split("=", 1)[1]
        return None


def _code(markdown: str) -> list[str]:
    """Lines of code: fenced blocks other than quoted output (`$ ` lines of those), inline spans, indented blocks."""
    pieces: list[str] = []
    for fence in _FENCE.finditer(markdown):
        body = fence["body"].replace("\\\n", " ")
        if fence["info"].strip() == "text":
            pieces += [line[2:] for line in body.splitlines() if line.startswith("$ ")]
        else:
            pieces += body.splitlines()
    prose = _FENCE.sub("", markdown)
    pieces += [" ".join(span.split()) for span in _SPAN.findall(prose)]
    pieces += _INDENTED.findall(prose.replace("\\\n", " "))
    return pieces


def _words(text: str) -> tuple[str, ...]:
    text = _SUBSTITUTION.sub("X", text)
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # an unclosed quote in prose: read what is there
        words = text.split()
    kept: list[str] = []
    for word in words:
        if word in _END:
            break
        kept.append(word.strip("[]"))
    return tuple(kept)


def commands(page: Path) -> list[Command]:
    found = []
    for code in _code(page.read_text()):
        for match in _COMMAND.finditer(code):
            words = _words(code[match.end() :])
            if words and words[0].endswith(":"):  # a message perfkit prints ("perfkit run: ..."), not a command
                continue
            found.append(Command(page.name, code[match.start() :].strip(), match["module"], words))
    return found


def cited() -> list[Command]:
    return [command for page in PAGES for command in commands(page)]
