"""``perfkit bench``, ``compare`` and ``report``: the experiment, its comparison, its drawing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from .._wire._names import BENCH_SCHEMA
from ..types import BenchResult
from ._options import CONFIG_TEMPLATE, MODEL, BenchError, BenchOptions

if TYPE_CHECKING:
    from ._experiment import run_bench

__all__ = ["BenchOptions", "BenchError", "run_bench", "read_result", "CONFIG_TEMPLATE", "MODEL"]


def read_result(path: str) -> BenchResult:
    """A bench result file, checked to be one (BenchError otherwise)."""
    try:
        document = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise BenchError(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError:
        raise BenchError(f"{path} is not JSON") from None
    if not isinstance(document, dict) or document.get("schema") != BENCH_SCHEMA:
        raise BenchError(f"{path} is not a perfkit bench result (schema {BENCH_SCHEMA})")
    return cast(BenchResult, document)


def __getattr__(name: str) -> Any:
    # The experiment (the load driver, asyncio, the launcher) loads when it
    # runs, not when the CLI reads the options' choices.
    if name == "run_bench":
        from ._experiment import run_bench

        return run_bench
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
