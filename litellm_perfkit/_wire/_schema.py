"""JSON Schema (draft 2020-12) of a result document, from its TypedDict in ``types``.

The TypedDicts are the documents' one declaration; docs/schemas/*.json and
``perfkit schema`` are generated here, and tests validate real runs against
them.
"""

from __future__ import annotations

import types as builtin_types
import typing
from typing import Any, Literal, Union

from .. import types as perfkit_types
from ._names import BENCH_SCHEMA, LOAD_SCHEMA, PERTURBATION_SCHEMA

__all__ = ["DOCUMENTS", "json_schema"]

DOCUMENTS: dict[str, tuple[str, Any]] = {
    "load": (LOAD_SCHEMA, perfkit_types.LoadResult),
    "bench": (BENCH_SCHEMA, perfkit_types.BenchResult),
    "perturbation": (PERTURBATION_SCHEMA, perfkit_types.PerturbationResult),
}

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
}


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _schema(tp: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return {**_schema(args[0], definitions), "description": str(args[1])}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, builtin_types.UnionType):
        return {"anyOf": [_schema(arg, definitions) for arg in args]}
    if origin in (list, tuple):
        return {"type": "array", "items": _schema(args[0], definitions) if args else {}}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema(args[1], definitions)}
    if _is_typeddict(tp):
        name = tp.__name__.lstrip("_")
        if name not in definitions:
            definitions[name] = {}  # recursion guard
            hints = typing.get_type_hints(tp, include_extras=True)
            definitions[name] = {
                "type": "object",
                "properties": {key: _schema(hint, definitions) for key, hint in hints.items()},
                "required": sorted(tp.__required_keys__),
                "additionalProperties": False,
                **({"description": " ".join(tp.__doc__.split())} if tp.__doc__ else {}),
            }
        return {"$ref": f"#/$defs/{name}"}
    raise TypeError(f"no JSON Schema for {tp!r}")


def json_schema(document: str) -> dict[str, Any]:
    """The JSON Schema of ``document`` ("load" or "bench")."""
    schema_name, declaration = DOCUMENTS[document]
    definitions: dict[str, Any] = {}
    root = _schema(declaration, definitions)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://litellm-perfkit.invalid/schemas/{schema_name}",
        "title": schema_name,
        **root,
        "$defs": dict(sorted(definitions.items())),
    }
