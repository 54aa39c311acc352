"""Turn profiling on from ``PERFKIT_*`` variables (set by ``perfkit run``), in each worker."""

from __future__ import annotations

import atexit
import os
from typing import Any, Callable

from .._core._guard import logger

__all__ = ["from_environment"]


def from_environment(app: Any) -> None:
    """Per-request profiles, per-stage profiles and pyroscope, each only when its
    variable is set; a failure is one warning and the proxy runs unprofiled."""
    env = os.environ
    service = env.get("OTEL_SERVICE_NAME") or "litellm-proxy"
    if env.get("PERFKIT_PROFILE_SECRET"):
        _try("per-request profiles", lambda: _request_profiles(app, env))
    if env.get("PERFKIT_STAGE_PROFILE_DIR"):
        _try("per-stage profiles", lambda: _stage_profiles(app, env))
    url = env.get("PERFKIT_PYROSCOPE_URL")
    if url:
        from ._pyroscope import start_pyroscope

        _try("pyroscope", lambda: start_pyroscope(url, service, int(env.get("PERFKIT_PYROSCOPE_SAMPLE_RATE", "100"))))


def _try(what: str, action: Any) -> None:
    try:
        action()
    except Exception as exc:
        logger.warning("perfkit: %s are off (%s: %s)", what, type(exc).__name__, exc)


def _request_profiles(app: Any, env: Any) -> None:
    from ._request import RequestProfileMiddleware

    app.add_middleware(RequestProfileMiddleware, secret=env["PERFKIT_PROFILE_SECRET"],
                       directory=env.get("PERFKIT_PROFILE_DIR", "perfkit-profiles"),
                       max_profiles=int(env.get("PERFKIT_PROFILE_MAX", "50")))  # fmt: skip


def _stage_profiles(app: Any, env: Any) -> None:
    from ._stages import StageProfiler

    directory = env["PERFKIT_STAGE_PROFILE_DIR"]
    profiler = StageProfiler(interval_s=float(env.get("PERFKIT_STAGE_PROFILE_INTERVAL_MS", "5")) / 1000)
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
    app.add_middleware(_OnShutdown, callback=write)
    atexit.register(write)


class _OnShutdown:
    """Pure ASGI: calls ``callback`` once the app reports its lifespan shutdown."""

    def __init__(self, app: Any, callback: Callable[[], None]) -> None:
        self.app = app
        self.callback = callback

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_then_callback(message: Any) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                self.callback()
            await send(message)

        await self.app(scope, receive, send_then_callback)
