"""speedscope's own file-format JSON schema, from its npm package (cached)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from litellm_perfkit._bench._venvs import CACHE, cache_lock

SPEEDSCOPE_VERSION = "1.25.0"
MEMBER = "package/dist/release/file-format-schema.json"


def speedscope_schema() -> dict[str, Any]:
    """The schema shipped in speedscope@1.25.0; fetched once with npm. Fails loudly without npm."""
    cached = CACHE / f"speedscope-{SPEEDSCOPE_VERSION}" / "file-format-schema.json"
    with cache_lock(cached.parent.with_suffix(".lock")):  # the README's tests run two at a time
        if not cached.exists():
            npm = shutil.which("npm")
            assert npm, "npm is needed once to fetch speedscope's schema (npm pack speedscope); install Node.js"
            with tempfile.TemporaryDirectory() as tmp:
                subprocess.run(
                    [npm, "pack", f"speedscope@{SPEEDSCOPE_VERSION}", "--pack-destination", tmp],
                    check=True,
                    capture_output=True,
                    timeout=300,
                )
                with tarfile.open(next(Path(tmp).glob("speedscope-*.tgz"))) as archive:
                    source = archive.extractfile(MEMBER)
                    assert source is not None, f"{MEMBER} is missing from the speedscope package"
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    cached.write_bytes(source.read())
    return json.loads(cached.read_text())  # type: ignore[no-any-return]


def speedscope_validator() -> Callable[[dict[str, Any]], None]:
    """Validates a document against the schema, fetched first (tests get it
    from the session fixture ``validate_speedscope``, which runs before the
    marker guard: fetching is setup, not what an unmarked test starts)."""
    import jsonschema

    schema = speedscope_schema()
    return lambda document: jsonschema.validate(document, schema)
