"""Every LiteLLM-internal name perfkit touches, one table per version range.

Only this module knows LiteLLM's internals. A point says which stage a
function is, and where to wrap it so that the wrap takes effect: a function
brought in with ``from x import f`` is replaced in the module that looks it
up (``litellm.proxy.common_request_processing.route_request``, not
``litellm.proxy.route_llm_request.route_request``); a method on its class; the
auth dependency inside the routes' dependency trees (FastAPI holds the
callable itself, so replacing the module attribute would do nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .._wire._names import AFTER_RESPONSE_STAGE, PROTOCOL_STAGE, STREAM_WAIT_STAGE, THREAD_STAGE, UPSTREAM_STAGE

__all__ = [
    "FRAMEWORK_STAGES",
    "MIDDLEWARES",
    "Point",
    "PointKind",
    "TABLES",
    "table_for",
    "AUTH",
    "LLM_CALL",
    "OUTBOUND",
    "STREAM_ITERATE",
]

PointKind = Literal[
    "call",
    "dependency",
    "stream",
    "sum",
    "route",
    "outbound",
    "body_wait",
    "body_stream",
    "routes_added",
    "metrics_app",
    "deferred",
    "detached",
    "thread",
    "protocol",
]
"""``call``: one stage per call (async or sync function, or method).
``dependency``: a FastAPI dependency of the proxy's routes.
``stream``: the proxy's streaming generator: its own time (``STREAM_ITERATE``),
and the stream's chunk count and longest gap.
``sum``: called per chunk or many times per request; durations are summed.
``route``: returns the LLM call unawaited; awaiting it is ``llm_call``.
``outbound``, ``body_wait``, ``body_stream``: an HTTP client's request, a
wait for more of a response's body, a generator over the body (_transport).
``routes_added``: registers routes after start-up (a lazily loaded feature);
when it returns, the new routes get the auth wrapper.
``metrics_app``: builds the ASGI app of LiteLLM's ``/metrics`` from a
``prometheus_client`` registry (its first argument, or the default one):
perfkit's families are added to that registry. Not a stage.
``deferred``: queues a coroutine (its argument) for a worker task to run
later: the request's hand-off waits for that task, whose steps after the
response are the ``after_response`` stage (_core/_after.py).
``detached``: starts a long-lived task (a queue's worker): it runs outside
the request's context, so no request is charged for it.
``thread``: hands its first callable argument to a thread pool: the call's
CPU in the thread is the request's, in the ``threads`` stage (_core/_threads.py).
``protocol``: the server's data callback, which parses a request's bytes and
starts its task: its time is that request's ``protocol`` stage (_core/_protocol.py)."""

When = Literal["now", "loaded"]
"""``now``: at instrument time (the module is imported if need be).
``loaded``: once something else has imported the module (when its code has
run): a feature LiteLLM loads on first use is not loaded early by perfkit."""

# The LiteLLM stage names the instrumentation itself reasons about (the
# upstream ones, which the bench reads too, are in _wire/_names.py).
AUTH = "auth"
LLM_CALL = "llm_call"
OUTBOUND = "outbound"  # waiting on another service outside the LLM call (a guardrail, an auth hook)
STREAM_ITERATE = "stream.iterate"  # the streaming generator's own time


@dataclass(frozen=True)
class Point:
    stage: str
    target: str  # "module:attribute" or "module:Class.method"
    kind: PointKind = "call"
    when: When = "now"

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def attribute(self) -> str:
        return self.target.split(":", 1)[1]


_PS = "litellm.proxy.proxy_server"
_CRP = "litellm.proxy.common_request_processing"
_UTILS = "litellm.proxy.utils"
_LOGGING_WORKER = "litellm.litellm_core_utils.logging_worker:LoggingWorker"

# Every provider's bytes pass through httpx or aiohttp (_transport).
_TRANSPORT: tuple[Point, ...] = (
    Point(UPSTREAM_STAGE, "httpx:AsyncClient.send", "outbound"),
    Point(UPSTREAM_STAGE, "httpx:Client.send", "outbound"),
    Point(UPSTREAM_STAGE, "aiohttp.client:ClientSession._request", "outbound"),
    Point(STREAM_WAIT_STAGE, "httpx:Response.aiter_raw", "body_stream"),
    Point(STREAM_WAIT_STAGE, "aiohttp.streams:StreamReader._wait", "body_wait"),
)

# LiteLLM runs the synchronous completion() behind each acompletion in the
# event loop's executor, and builds a stream's final response with anyio.
_THREADS: tuple[Point, ...] = (
    Point(THREAD_STAGE, "concurrent.futures.thread:ThreadPoolExecutor.submit", "thread"),
    Point(THREAD_STAGE, "anyio.to_thread:run_sync", "thread"),
)

# The framework's layers around LiteLLM's endpoints: what each costs is
# then named too, not left outside every stage.
_FRAMEWORK: tuple[Point, ...] = (
    Point("routing", "starlette.routing:Router.__call__"),
    Point("dependencies", "fastapi.routing:solve_dependencies"),
    Point("endpoint", "fastapi.routing:run_endpoint_function"),
    Point("response", "starlette.responses:Response.__call__"),
    Point("response", "starlette.responses:StreamingResponse.__call__"),
)

# The server's parsing, before the request reaches the app (uvicorn: LiteLLM's
# server; the protocol its --http option chose is the one that is loaded).
_SERVER: tuple[Point, ...] = (
    Point(
        PROTOCOL_STAGE,
        "uvicorn.protocols.http.httptools_impl:HttpToolsProtocol.data_received",
        "protocol",
        when="loaded",
    ),
    Point(PROTOCOL_STAGE, "uvicorn.protocols.http.h11_impl:H11Protocol.data_received", "protocol", when="loaded"),
)

MIDDLEWARES = "middlewares"
"""The proxy's middleware stack inside perfkit's (LiteLLM's middlewares, the
framework's exception handling): a stage around the app perfkit's middleware calls."""

FRAMEWORK_STAGES = frozenset(point.stage for point in _FRAMEWORK) | {MIDDLEWARES}
"""Stages that only frame LiteLLM's work: an upstream wait inside them is the provider's, not another service's."""

_COMMON: tuple[Point, ...] = (
    _TRANSPORT
    + _THREADS
    + _FRAMEWORK
    + _SERVER
    + (
        Point("request.parse", f"{_PS}:_read_request_body"),
        Point(AUTH, "litellm.proxy.auth.user_api_key_auth:user_api_key_auth", "dependency"),
        Point("pre_call", f"{_CRP}:ProxyBaseLLMRequestProcessing.common_processing_pre_call_logic"),
        Point("hooks.pre_call", f"{_UTILS}:ProxyLogging.pre_call_hook"),
        Point("hooks.during_call", f"{_UTILS}:ProxyLogging.during_call_hook"),
        # Every LLM route (chat, completions, embeddings, messages, responses)
        # asks route_request for its call: one point for all of them.
        Point("route", f"{_CRP}:route_request", "route"),
        Point("hooks.post_call", f"{_UTILS}:ProxyLogging.post_call_success_hook"),
        Point("headers", f"{_CRP}:ProxyBaseLLMRequestProcessing.get_custom_headers"),
        Point("serialize", "fastapi.routing:serialize_response"),
        Point(STREAM_ITERATE, f"{_PS}:async_data_generator", "stream"),
        # Anthropic /v1/messages (and other SSE formats) stream through this one.
        Point(STREAM_ITERATE, f"{_CRP}:ProxyBaseLLMRequestProcessing.async_streaming_data_generator", "stream"),
        Point("stream.hooks", f"{_UTILS}:ProxyLogging.async_post_call_streaming_hook", "sum"),
        Point("stream.cleanup", "litellm.litellm_core_utils.streaming_handler:CustomStreamWrapper.aclose", "sum"),
        # Success logging runs after the response, in a task the logging worker
        # starts per request in that request's context.
        Point(AFTER_RESPONSE_STAGE, f"{_LOGGING_WORKER}.enqueue", "deferred"),
        Point(AFTER_RESPONSE_STAGE, f"{_LOGGING_WORKER}.start", "detached"),
    )
)

TABLES: dict[str, tuple[Point, ...]] = {
    # Before the callback-capability cache: hooks scan litellm.callbacks per
    # request; the one separable scan is the post-call guardrail check.
    "<1.103": _COMMON
    + (
        Point("callbacks.check", f"{_CRP}:ProxyBaseLLMRequestProcessing._has_post_call_guardrails", "sum"),
        # The prometheus callback mounts /metrics with prometheus_client's own app.
        Point("metrics", "prometheus_client:make_asgi_app", "metrics_app", when="loaded"),
    ),
    # The capability cache (ProxyLogging._callback_capabilities), the direct
    # stream fast path and the fast chunk serializer.
    ">=1.103": _COMMON
    + (
        # /v1/messages and other features are imported and routed on first use.
        # The first request to such a feature waits for its import: "lazy_load".
        Point("lazy_load", "litellm.proxy._lazy_features:_force_load", "routes_added"),
        Point("request.parse", "litellm.proxy.anthropic_endpoints.endpoints:_read_request_body", when="loaded"),
        Point("callbacks.check", f"{_UTILS}:ProxyLogging._callback_capabilities", "sum"),
        Point("callbacks.check", f"{_CRP}:ProxyBaseLLMRequestProcessing._has_post_call_guardrails", "sum"),
        Point("stream.serialize", f"{_PS}:_serialize_streaming_chunk", "sum"),
        Point(
            "metrics",
            "litellm.integrations.prometheus_metrics_endpoint:make_metrics_asgi_app",
            "metrics_app",
            when="loaded",
        ),
    ),
}


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def table_for(version: str) -> tuple[str, tuple[Point, ...]]:
    """(range name, points) for an installed LiteLLM version."""
    key = ">=1.103" if _version_tuple(version) >= (1, 103) else "<1.103"
    return key, TABLES[key]
