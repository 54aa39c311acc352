"""The subpackages depend on each other one way: no import cycle between
them, counting the imports inside functions (deferred for start-up time,
they are still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import litellm_perfkit

PACKAGE = Path(litellm_perfkit.__file__).parent


def _unit(module: str) -> str:
    """The part of the package a module belongs to: ``_core``, ``_export``, ... or a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The package's modules ``path`` imports, absolute."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("litellm_perfkit")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("litellm_perfkit"):
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        unit = _unit(_module_name(path))
        for target in _imports(path):
            other = _unit(target)
            if other not in (unit, "litellm_perfkit"):
                graph.setdefault(unit, set()).add(other)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_between_the_parts_of_the_package() -> None:
    graph = _graph()
    assert {"_core", "_export", "_load", "_mock", "_bench", "_cli"} <= set(graph) | {
        target for targets in graph.values() for target in targets
    }
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_lowest_parts_import_no_other() -> None:
    graph = _graph()
    assert graph.get("_wire", set()) <= {"types"}, graph.get("_wire")
    assert graph.get("types", set()) <= {"_wire", "_core"}, graph.get("types")
