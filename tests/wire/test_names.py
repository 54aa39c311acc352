"""Names declared once: types.py and _names.py import nothing of perfkit's (setup.py loads both by path)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from litellm_perfkit._core._middleware import PerfkitMiddleware
from litellm_perfkit._wire import _names
from litellm_perfkit._wire._names import UPSTREAM_STAGE
from litellm_perfkit.types import RequestRecord

_CSRC = Path(__file__).parents[2] / "litellm_perfkit" / "_core" / "csrc"


async def _app(scope: object, receive: object, send: object) -> None: ...


def test_the_default_upstream_stage_is_the_declared_one() -> None:
    assert RequestRecord(start_ns=0).upstream_stages == (UPSTREAM_STAGE,)
    assert PerfkitMiddleware(_app).upstream_stages == frozenset({UPSTREAM_STAGE})


def test_names_imports_nothing_so_setup_can_load_it_by_path() -> None:
    tree = ast.parse(Path(_names.__file__).read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert all(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in imports)


def test_no_c_source_spells_a_declared_header_name_or_content_type() -> None:
    headers = {value for name, value in vars(_names).items() if name.endswith("_HEADER") and isinstance(value, str)}
    assert set(_names.C_HEADERS.values()) <= headers
    declared = headers | set(_names.C_CONTENT_TYPES.values())
    spelled = {
        (path.name, literal)
        for path in sorted(_CSRC.glob("*.[ch]"))
        for literal in re.findall(r'"([^"\n]*)"', path.read_text())
        if literal.lower() in declared
    }
    assert not spelled, (
        f"C takes header names and content types from the generated PK_HEADER_*, PK_CONTENT_TYPE_*"
        f" (_names.C_HEADERS, C_CONTENT_TYPES), never spelled: {spelled}"
    )
