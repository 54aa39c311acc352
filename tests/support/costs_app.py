"""A gateway-like app whose overhead parts are known: each blocks for a set
time (``time.sleep``: never early; a loaded machine only adds to it).

One request to ``/v1/chat/completions`` spends ``UPSTREAM_MS`` in the
upstream stage, ``ATTRIBUTED_MS`` in other stages' own time (``auth``, and
``llm_call`` around the upstream call) and ``UNATTRIBUTED_MS`` outside every
stage. Each part of perfkit's overhead sum is checked against its injected
cost, not against the other parts: were one part to take time from another,
the other would fall below its cost.
"""

from __future__ import annotations

import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from litellm_perfkit import stage

__all__ = ["ATTRIBUTED_MS", "UNATTRIBUTED_MS", "UPSTREAM_MS", "make_app", "overhead_failures"]

AUTH_MS, LLM_CALL_OWN_MS, UPSTREAM_MS, UNATTRIBUTED_MS = 4.0, 3.0, 20.0, 8.0
ATTRIBUTED_MS = AUTH_MS + LLM_CALL_OWN_MS


def _block(ms: float) -> None:
    time.sleep(ms / 1000)


def make_app() -> Starlette:
    async def chat(request: Request) -> Response:
        await request.body()
        _block(UNATTRIBUTED_MS / 2)
        with stage("auth"):
            _block(AUTH_MS)
        async with stage("llm_call"):
            _block(LLM_CALL_OWN_MS)
            async with stage("upstream"):
                _block(UPSTREAM_MS)
        _block(UNATTRIBUTED_MS / 2)
        return Response(b"{}", media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def overhead_failures(attributes: dict[str, float], client_ms: float) -> list[str]:
    """What of a request's ``perfkit.*_ms`` server attributes contradicts the
    injected costs or the client's own clock (``client_ms``: the request as
    the client timed it, which holds the server's)."""
    failures = []
    for key, injected in (
        ("perfkit.upstream_ms", UPSTREAM_MS),
        ("perfkit.attributed_ms", ATTRIBUTED_MS),
        ("perfkit.unattributed_ms", UNATTRIBUTED_MS),
        ("perfkit.overhead_ms", ATTRIBUTED_MS + UNATTRIBUTED_MS),
    ):
        if attributes[key] < injected:
            failures.append(f"{key} {attributes[key]:.3f} < the injected {injected} ms")
    if not UPSTREAM_MS + ATTRIBUTED_MS + UNATTRIBUTED_MS <= attributes["perfkit.total_ms"] <= client_ms:
        failures.append(
            f"perfkit.total_ms {attributes['perfkit.total_ms']:.3f} outside the injected costs and the client's {client_ms:.3f} ms"
        )
    return failures
