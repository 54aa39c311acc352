"""Importing the mock, the load driver or the Locust user loads neither the
recorder nor the exporters (each runs in processes that serve no gateway)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import gc, sys
import {module}
loaded = sorted(m for m in sys.modules if m.startswith(("litellm_perfkit._core", "litellm_perfkit._export", "litellm_perfkit._litellm")))
ours = [cb for cb in gc.callbacks if getattr(cb, "__module__", "").startswith("litellm_perfkit")]
print(loaded, len(ours))
"""


@pytest.mark.parametrize(
    "module", ["litellm_perfkit.mock", "litellm_perfkit._load", "litellm_perfkit.locust", "litellm_perfkit._cli._main"]
)
def test_light_imports(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK.format(module=module)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[] 0", result.stdout


def test_the_public_names_load_on_first_use() -> None:
    code = "import litellm_perfkit, sys; assert 'litellm_perfkit._core' not in sys.modules; litellm_perfkit.stage; print('litellm_perfkit._core' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "True", result.stderr[-2000:]
