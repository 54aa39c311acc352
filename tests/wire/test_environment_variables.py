"""Every environment variable the package names is declared once, in
_wire/_environment_variables.py, and documented in docs/configuration.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from litellm_perfkit._wire import _environment_variables as variables

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "litellm_perfkit"
HOME = PACKAGE / "_wire" / "_environment_variables.py"
CONFIGURATION = ROOT / "docs" / "configuration.md"

# PERFKIT_* and OTEL_* as words (not PERFKIT_OTEL_X's inner OTEL_X); a name
# ending in "_" is a family written as PREFIX_* in prose.
NAME = re.compile(r"(?<![A-Za-z0-9_])(?:PERFKIT|OTEL)_[A-Z0-9_]*")
# C include guards (#ifndef PERFKIT_SPEEDUPS_H) are macros, not variables.
INCLUDE_GUARD = re.compile(r"#\s*(?:ifndef|define|endif)\s+(?:/\*\s*)?(PERFKIT_[A-Z0-9_]+_H)\b")


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyi", ".c", ".h") and p.is_file())


def names_in(text: str) -> set[str]:
    return set(NAME.findall(text)) - set(INCLUDE_GUARD.findall(text))


def declarations() -> dict[str, str]:
    """Each module-level constant of the home module: its name -> its value."""
    return {
        name: value
        for name, value in vars(variables).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
    }


def test_each_variable_is_declared_once_with_a_docstring() -> None:
    tree = ast.parse(HOME.read_text())
    assigned: list[str] = []
    undocumented: list[str] = []
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.Assign):
            assert len(node.targets) == 1 and isinstance(node.targets[0], ast.Name), ast.unparse(node)
            name = node.targets[0].id
            assigned.append(name)
            after = tree.body[index + 1] if index + 1 < len(tree.body) else None
            documented = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            if not documented:
                undocumented.append(name)
    assert sorted(assigned) == sorted(set(assigned)), "a constant is assigned twice"
    assert undocumented == []
    declared = declarations()
    assert sorted(declared) == sorted(assigned)
    # Named as the variable, so a grep for either finds both; a prefix names its family.
    assert {n: v for n, v in declared.items() if n != v and not n.endswith("_PREFIX")} == {}
    assert len(set(declared.values())) == len(declared), "two constants name one variable"


def test_every_name_the_package_uses_is_declared() -> None:
    declared = set(declarations().values())
    declared |= set(declarations())  # the home module's own identifiers (PERFKIT_OTEL_PREFIX)
    undeclared: dict[str, list[str]] = {}
    for path in sources():
        for name in names_in(path.read_text()):
            known = name in declared if not name.endswith("_") else any(d.startswith(name) for d in declared)
            if not known:
                undeclared.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert undeclared == {}


def test_every_declared_variable_is_used_and_documented() -> None:
    declared = set(declarations().values())
    elsewhere = "\n".join(p.read_text() for p in sources() if p != HOME)
    unused = {name for name in declared if not re.search(rf"(?<![A-Za-z0-9_]){name}(?![A-Za-z0-9])", elsewhere)}
    assert unused == set()
    documented = set(re.findall(r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9]*_[A-Z0-9_]*", CONFIGURATION.read_text()))
    assert declared - documented == set()


def test_no_module_spells_a_variable_out() -> None:
    """Code refers to the constants: a string literal that is a variable's whole name lives only in the home module."""
    declared = set(declarations().values())
    spelled: list[str] = []
    for path in sources():
        if path.suffix != ".py" or path == HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in declared:
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert spelled == []


def test_perfkit_otel_names_map_to_the_standard_ones() -> None:
    assert variables.standard_variable(variables.PERFKIT_OTEL_SERVICE_NAME) == variables.OTEL_SERVICE_NAME
    assert variables.standard_variable("PERFKIT_OTEL_EXPORTER_OTLP_TIMEOUT") == variables.OTEL_EXPORTER_OTLP_TIMEOUT
    assert variables.standard_variable(variables.PERFKIT_RECORD_RATE) is None
    assert variables.standard_variable(variables.OTEL_SERVICE_NAME) is None
