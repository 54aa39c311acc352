"""Both implementations of the request path, for tests that run each in one process."""

from __future__ import annotations

from litellm_perfkit._core._backend import Backend, BackendName, backend

NAMES: tuple[BackendName, ...] = ("python", "c")


def load(name: BackendName) -> Backend:
    """The backend; the C one fails loudly when the accelerator was not built."""
    try:
        return backend(name)
    except ImportError:
        raise AssertionError(
            "litellm_perfkit._core._speedups was not built (no C compiler at install time): "
            "install gcc and the Python headers, then `pip install -e .` again"
        ) from None
