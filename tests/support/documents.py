"""Validate a result document against its published schema (docs/schemas/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import orjson

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def validate(document: Any, kind: str) -> None:
    schema = orjson.loads((DOCS / f"{kind}.json").read_bytes())
    jsonschema.Draft202012Validator(schema).validate(orjson.loads(orjson.dumps(document)))
