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

__all__ = ["Point", "PointKind", "TABLES", "ROUTES", "table_for", "UPSTREAM_STAGES"]

PointKind = Literal["call", "dependency", "stream", "sum"]
"""``call``: one stage per call (async or sync function, or method).
``dependency``: a FastAPI dependency of the instrumented routes.
``stream``: the proxy's streaming generator: ``stream.iterate`` (its own
time) and ``stream.upstream_wait`` (time suspended waiting for chunks).
``sum``: called per chunk or many times per request; durations are summed."""


@dataclass(frozen=True)
class Point:
    stage: str
    target: str  # "module:attribute" or "module:Class.method"
    kind: PointKind = "call"

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def attribute(self) -> str:
        return self.target.split(":", 1)[1]


_PS = "litellm.proxy.proxy_server"
_CRP = "litellm.proxy.common_request_processing"
_UTILS = "litellm.proxy.utils"

_COMMON: tuple[Point, ...] = (
    Point("request.parse", f"{_PS}:_read_request_body"),
    Point("auth", "litellm.proxy.auth.user_api_key_auth:user_api_key_auth", "dependency"),
    Point("pre_call", f"{_CRP}:ProxyBaseLLMRequestProcessing.common_processing_pre_call_logic"),
    Point("hooks.pre_call", f"{_UTILS}:ProxyLogging.pre_call_hook"),
    Point("hooks.during_call", f"{_UTILS}:ProxyLogging.during_call_hook"),
    Point("route", f"{_CRP}:route_request"),
    Point("llm_call", "litellm.router:Router.acompletion"),
    Point("llm_call", "litellm.router:Router.aembedding"),
    Point("llm_call", "litellm.router:Router.atext_completion"),
    Point("upstream", "litellm.llms.openai.openai:OpenAIChatCompletion.make_openai_chat_completion_request"),
    Point("upstream", "litellm.llms.openai.completion.handler:OpenAITextCompletion.acompletion"),
    Point("upstream", "litellm.llms.openai.openai:OpenAIChatCompletion.make_openai_embedding_request"),
    Point("hooks.post_call", f"{_UTILS}:ProxyLogging.post_call_success_hook"),
    Point("headers", f"{_CRP}:ProxyBaseLLMRequestProcessing.get_custom_headers"),
    Point("serialize", "fastapi.routing:serialize_response"),
    Point("stream", f"{_PS}:async_data_generator", "stream"),
    Point("stream.hooks", f"{_UTILS}:ProxyLogging.async_post_call_streaming_hook", "sum"),
    Point("stream.cleanup", "litellm.litellm_core_utils.streaming_handler:CustomStreamWrapper.aclose", "sum"),
)

TABLES: dict[str, tuple[Point, ...]] = {
    # Before the callback-capability cache: hooks scan litellm.callbacks per
    # request; the one separable scan is the post-call guardrail check.
    "<1.103": _COMMON
    + (
        Point("callbacks.check", f"{_CRP}:ProxyBaseLLMRequestProcessing._has_post_call_guardrails", "sum"),
    ),
    # The capability cache (ProxyLogging._callback_capabilities), the direct
    # stream fast path and the fast chunk serializer.
    ">=1.103": _COMMON
    + (
        Point("callbacks.check", f"{_UTILS}:ProxyLogging._callback_capabilities", "sum"),
        Point("callbacks.check", f"{_CRP}:ProxyBaseLLMRequestProcessing._has_post_call_guardrails", "sum"),
        Point("stream.serialize", f"{_PS}:_serialize_streaming_chunk", "sum"),
    ),
}

# The routes whose auth dependency is wrapped.
ROUTES = frozenset(
    {
        "/chat/completions",
        "/v1/chat/completions",
        "/completions",
        "/v1/completions",
        "/embeddings",
        "/v1/embeddings",
        "/engines/{model:path}/chat/completions",
        "/openai/deployments/{model:path}/chat/completions",
    }
)

# Stages that wait on the provider: the time the gateway does not spend itself.
UPSTREAM_STAGES = frozenset({"upstream", "stream.upstream_wait"})


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
