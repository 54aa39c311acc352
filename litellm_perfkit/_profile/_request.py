"""Per-request profiles with pyinstrument, for requests that carry the secret.

A request with ``x-perfkit-profile: <token>`` equal to the configured secret
is profiled (pyinstrument in async mode: the request's own task, with time
awaiting others shown as such) and saved as HTML and speedscope JSON. The
header is removed before the app sees it, whatever its value, so the token
never reaches the gateway's logs. Only a caller with the right token gets
``x-perfkit-profile-id`` back. With no secret the middleware passes every
request straight through.
"""

from __future__ import annotations

import hmac
import os
import threading
import time
from pathlib import Path
from typing import Any

from .._core._guard import internal_error, logger, warn_once
from .._wire import _names as names
from .._wire._headers import parse_traceparent
from ..types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestProfileMiddleware", "PROFILE_HEADER", "PROFILE_ID_HEADER"]

PROFILE_HEADER = names.PROFILE_HEADER.encode()
_TRACEPARENT_HEADER = names.TRACEPARENT_HEADER.encode()
PROFILE_ID_HEADER = names.PROFILE_ID_HEADER.encode()


class RequestProfileMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        secret: str | None,
        directory: str | Path = "perfkit-profiles",
        max_profiles: int = 50,
        max_concurrent: int = 2,
        interval_s: float = 0.001,
    ) -> None:
        self.app = app
        self.secret = secret.encode() if secret else None
        if self.secret is not None:
            try:
                from pyinstrument import Profiler  # noqa: F401 - fail at setup, not per request
            except ImportError:
                raise RuntimeError(
                    "per-request profiles need pyinstrument: pip install 'litellm_perfkit[profile]'"
                ) from None
        self.directory = Path(directory)
        self.max_profiles = max_profiles
        self.max_concurrent = max_concurrent
        self.interval_s = interval_s
        self.written = 0
        self.active = 0
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.secret is None:
            await self.app(scope, receive, send)
            return
        token = None
        headers = scope["headers"]
        for name, value in headers:
            if name == PROFILE_HEADER:
                token = value
                break
        if token is None:
            await self.app(scope, receive, send)
            return
        scope = {**scope, "headers": [(n, v) for n, v in headers if n != PROFILE_HEADER]}
        if not hmac.compare_digest(token, self.secret) or not self._claim():
            await self.app(scope, receive, send)
            return
        try:
            await self._profiled(scope, receive, send)
        finally:
            with self._lock:
                self.active -= 1

    def _claim(self) -> bool:
        with self._lock:
            if self.written + self.active >= self.max_profiles:
                warn_once(
                    "profiles-full",
                    "perfkit: %d request profiles written to %s; no more will be taken",
                    self.written,
                    self.directory,
                )
                return False
            if self.active >= self.max_concurrent:
                return False
            self.active += 1
            return True

    async def _profiled(self, scope: Scope, receive: Receive, send: Send) -> None:
        from pyinstrument import Profiler

        traceparent = next((v.decode("latin-1") for n, v in scope["headers"] if n == _TRACEPARENT_HEADER), None)
        parsed = parse_traceparent(traceparent)
        profile_id = f"{int(time.time() * 1000)}-{parsed[0] if parsed else os.urandom(8).hex()}"

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (PROFILE_ID_HEADER, profile_id.encode())],
                }
            await send(message)

        try:
            profiler = Profiler(interval=self.interval_s, async_mode="enabled")
            profiler.start()
        except Exception as exc:  # the request is served as if unprofiled
            internal_error("request profile", exc)
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            try:
                profiler.stop()
                self._save(profiler, profile_id, scope.get("path", ""))
            except Exception as exc:
                internal_error("request profile", exc)

    def _save(self, profiler: Any, profile_id: str, path: str) -> None:
        from pyinstrument.renderers import SpeedscopeRenderer

        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / f"{profile_id}.html").write_text(profiler.output_html())
        (self.directory / f"{profile_id}.speedscope.json").write_text(profiler.output(renderer=SpeedscopeRenderer()))
        with self._lock:
            self.written += 1
        logger.info("perfkit: profile of %s written: %s", path, self.directory / f"{profile_id}.html")
