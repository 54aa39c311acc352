"""Every span attribute, resource attribute and metric perfkit exports is in a
table of docs/telemetry.md (docs/litellm.md for the LiteLLM ones), and every
``perfkit.*`` name the docs quote is one perfkit exports."""

from __future__ import annotations

import ast
import re
from typing import get_args

import orjson

from litellm_perfkit._export._metrics import COUNTER_DESCRIPTIONS, DESCRIPTIONS
from litellm_perfkit._export._otlp import _resource_attributes
from litellm_perfkit._litellm._fastpath import FastPath, Reading
from litellm_perfkit._mock._engine import _stamped
from litellm_perfkit._wire._names import Attr, Metric, SemConv
from litellm_perfkit.types import Mark
from tests.docs.commands import PAGES, ROOT
from tests.docs.markdown import prose, section, spans, table_rows

_PACKAGE = ROOT / "litellm_perfkit"
_NAME = re.compile(r"^perfkit\.[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$")
_QUOTED = re.compile(r"(?<![\w.])perfkit\.[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*(?P<after>[./]?)")


def _constants(cls: type) -> set[str]:
    return {value for name, value in vars(cls).items() if name.isupper() and isinstance(value, str)}


def _literal_names() -> set[str]:
    """Every ``perfkit.*`` name written as a string literal anywhere in the package."""
    return {
        node.value
        for path in _PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.match(node.value)
    }


def exported_names() -> set[str]:
    """The keys and metric names perfkit writes: its declared ones, the ones it
    builds (marks, fast paths), and any it spells as a literal."""
    return (
        (_constants(Attr) - {Attr.LITELLM_PREFIX})
        | _constants(SemConv)
        | {f"perfkit.{mark}_ms" for mark in get_args(Mark)}
        | {f"{Attr.LITELLM_PREFIX}{name}" for name in (*get_args(FastPath), *get_args(Reading))}
        | set(DESCRIPTIONS)
        | set(COUNTER_DESCRIPTIONS)
        | _constants(Metric)
        | {key for key, _ in _resource_attributes("service", {})}
        | _literal_names()
    )


def documented_names() -> set[str]:
    """The names in a table of telemetry.md or litellm.md (the fast-path table lists them without their prefix)."""
    telemetry, litellm = ((ROOT / "docs" / page).read_text() for page in ("telemetry.md", "litellm.md"))
    fast_paths = section(litellm, "## Fast-path attributes")
    names = {
        span
        for page in (telemetry, litellm.replace(fast_paths, ""))
        for row in table_rows(page)
        for cell in row
        for span in spans(cell)
    }
    return names | {f"{Attr.LITELLM_PREFIX}{span}" for row in table_rows(fast_paths) for span in spans(row[0])}


def test_the_inventory_finds_the_declared_built_and_literal_names() -> None:
    names = exported_names()
    assert {Attr.TOTAL_MS, SemConv.HTTP_ROUTE, "perfkit.first_token_ms", "perfkit.litellm.pre_call_hooks"} <= names
    assert {"perfkit.stage.duration", "perfkit.requests.dropped", "perfkit.litellm.fast_path_source"} <= names
    assert {"process.pid", "service.instance.id"} <= names


def test_every_exported_name_is_in_a_table_of_the_docs() -> None:
    missing = sorted(exported_names() - documented_names())
    assert not missing, f"add these to a table of docs/telemetry.md (or docs/litellm.md): {missing}"


def test_the_docs_quote_no_perfkit_name_that_is_not_exported() -> None:
    stamp = orjson.loads(_stamped(b'{"id":""', 0))["perfkit"]  # the mock's stamp in a chunk (docs/mock.md)
    known = exported_names() | {f"perfkit.{field}" for field in stamp}
    quoted = {
        (page.name, match[0])
        for page in PAGES
        for span in spans(prose(page.read_text()))
        for match in _QUOTED.finditer(span)
        if match["after"] != "/"  # a schema's name, perfkit.load/1
    }
    unknown = sorted(
        (page, name)
        for page, name in quoted
        if name not in known and not (name.endswith(".") and name == Attr.LITELLM_PREFIX)
    )
    assert not unknown, f"the docs quote names perfkit does not export: {unknown}"
