"""The result documents' schemas: generated from their declarations, and what docs/ publishes."""

from __future__ import annotations

from pathlib import Path

import pytest

from litellm_perfkit._cli._schema import render
from litellm_perfkit._wire._schema import DOCUMENTS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_docs_publish_the_schema_the_declaration_gives(document: str) -> None:
    published = (DOCS / f"{document}.json").read_text()
    assert published == render(document), (
        f"docs/schemas/{document}.json is stale: perfkit schema {document} > docs/schemas/{document}.json"
    )
