"""The pinned LiteLLM versions the tests run, from the product's venv cache."""

from __future__ import annotations

import os

from litellm_perfkit._bench._venvs import OFFLINE_ENV, litellm_python

__all__ = ["VERSIONS", "litellm_env", "litellm_python"]

VERSIONS = ("1.83.14", "1.103.0")


def litellm_env() -> dict[str, str]:
    return {**os.environ, **OFFLINE_ENV}
