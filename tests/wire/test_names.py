"""Names that must be spelled twice: types.py imports nothing of perfkit's (setup.py loads it by path)."""

from __future__ import annotations

from litellm_perfkit._core._middleware import PerfkitMiddleware
from litellm_perfkit._wire._names import UPSTREAM_STAGE
from litellm_perfkit.types import RequestRecord


async def _app(scope: object, receive: object, send: object) -> None: ...


def test_the_default_upstream_stage_is_the_declared_one() -> None:
    assert RequestRecord(start_ns=0).upstream_stages == (UPSTREAM_STAGE,)
    assert PerfkitMiddleware(_app).upstream_stages == frozenset({UPSTREAM_STAGE})
