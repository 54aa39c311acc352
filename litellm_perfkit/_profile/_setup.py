"""Turn profiling on from ``PERFKIT_*`` variables (set by ``perfkit run``), in each worker."""

from __future__ import annotations

import atexit
import os
from typing import Any

from .._core._guard import logger
from .._core._lifespan import OnShutdown
from .._export._settings import DEFAULT_SERVICE_NAME
from .._wire._environment_variables import (
    OTEL_SERVICE_NAME,
    PERFKIT_OTEL_SERVICE_NAME,
    PERFKIT_PROFILE_DIR,
    PERFKIT_PROFILE_MAX,
    PERFKIT_PROFILE_SECRET,
    PERFKIT_PYROSCOPE_SAMPLE_RATE,
    PERFKIT_PYROSCOPE_URL,
    PERFKIT_STAGE_PROFILE_DIR,
    PERFKIT_STAGE_PROFILE_INTERVAL_MS,
)

__all__ = ["from_environment"]


def from_environment(app: Any) -> None:
    """Per-request profiles, per-stage profiles and pyroscope, each only when its
    variable is set; a failure is one warning and the proxy runs unprofiled."""
    env = os.environ
    service = env.get(PERFKIT_OTEL_SERVICE_NAME) or env.get(OTEL_SERVICE_NAME) or DEFAULT_SERVICE_NAME
    if env.get(PERFKIT_PROFILE_SECRET):
        _try("per-request profiles", lambda: _request_profiles(app, env))
    if env.get(PERFKIT_STAGE_PROFILE_DIR):
        _try("per-stage profiles", lambda: _stage_profiles(app, env))
    url = env.get(PERFKIT_PYROSCOPE_URL)
    if url:
        from ._pyroscope import start_pyroscope

        _try("pyroscope", lambda: start_pyroscope(url, service, int(env.get(PERFKIT_PYROSCOPE_SAMPLE_RATE, "100"))))


def _try(what: str, action: Any) -> None:
    try:
        action()
    except Exception as exc:
        logger.warning("perfkit: %s are off (%s: %s)", what, type(exc).__name__, exc)


def _request_profiles(app: Any, env: Any) -> None:
    from ._request import RequestProfileMiddleware

    app.add_middleware(
        RequestProfileMiddleware,
        secret=env[PERFKIT_PROFILE_SECRET],
        directory=env.get(PERFKIT_PROFILE_DIR, "perfkit-profiles"),
        max_profiles=int(env.get(PERFKIT_PROFILE_MAX, "50")),
    )


def _stage_profiles(app: Any, env: Any) -> None:
    from ._stages import StageProfiler

    directory = env[PERFKIT_STAGE_PROFILE_DIR]
    interval_ms = env.get(PERFKIT_STAGE_PROFILE_INTERVAL_MS)
    profiler = StageProfiler(interval_s=float(interval_ms) / 1000 if interval_ms else None)
    profiler.start()
    done: list[bool] = []

    def write() -> None:
        if done:
            return
        done.append(True)
        profiler.stop()
        try:
            profiler.write(directory, prefix=f"stages-{os.getpid()}")
        except OSError as exc:
            logger.warning("perfkit: could not write the stage profile to %s (%s)", directory, exc.strerror)

    # uvicorn re-raises SIGTERM after a graceful shutdown, so atexit alone would
    # never run: write when the app's lifespan has shut down, else at exit.
    app.add_middleware(OnShutdown, callback=write)
    atexit.register(write)
