"""Upstream time where every provider's bytes go: the HTTP clients.

LiteLLM reaches every provider through httpx (its own ``AsyncHTTPHandler``,
and the clients inside the OpenAI, Azure and Anthropic SDKs) or aiohttp (its
aiohttp transport under httpx, and the aiohttp handler). Timing those, not
one handler per provider, makes ``upstream`` true for every provider:

- an outbound request (``send``) is a block stage until the response's
  headers (or, unstreamed, its whole body) are in;
- each wait for more of a response's body is a wait too: a block stage when
  a stage is open (a first chunk read inside the LLM call), else summed into
  ``stream.upstream_wait`` (the chunks of a stream the proxy relays).

Inside the LLM call, or outside every stage but the framework's (routing,
endpoint, response: a relayed stream), these are
``upstream``; inside another stage (a guardrail or an auth hook calling out)
they are ``outbound``: the gateway waits, but not on the provider, so it
stays in the overhead. Nested clients (httpx over LiteLLM's
aiohttp transport) are counted once: the outermost wait is measured.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

# _collector's helpers and _stage.summed_call through their modules: C's where the accelerator runs (use_speedups).
from .._core import Stage, _collector, _stage
from .._core._context import open_stage, read_timeline
from .._core._guard import internal_error
from .._core._timeline import Timeline
from .._wire._names import STREAM_WAIT_STAGE, UPSTREAM_STAGE, Attr, SemConv
from ._points import AUTH, FRAMEWORK_STAGES, LLM_CALL, OUTBOUND

__all__ = ["awaited_stage", "body_stream", "body_wait", "outbound"]

T = TypeVar("T")

# True while a wait is measured in this context: nested clients do not count twice.
_MEASURING: ContextVar[bool] = ContextVar("perfkit_measuring", default=False)
# True inside the LLM call (and the tasks it starts): outbound waits there are the provider's.
_IN_LLM_CALL: ContextVar[bool] = ContextVar("perfkit_in_llm_call", default=False)
# Their get bound once: a ContextVar's method lookup binds anew per call (_core._context).
_measuring: Callable[[], bool] = _MEASURING.get
_in_llm_call: Callable[[], bool] = _IN_LLM_CALL.get


def _in_hook_stage() -> bool:
    """Inside one of LiteLLM's own stages (an auth hook, a guardrail), not only the framework's around them."""
    stage = open_stage()
    return stage is not None and stage.name not in FRAMEWORK_STAGES


def _block_name(timeline: Timeline) -> str:
    """Inside the LLM call, or outside every hook stage (a stream whose request
    is sent when it is first read), the wait is the provider's; inside another
    stage (a guardrail, an auth hook), another service's."""
    if _in_llm_call() or not _in_hook_stage():
        timeline.attributes.pop(Attr.UPSTREAM_UNMEASURED, None)  # measured after all (see _check_coverage)
        return UPSTREAM_STAGE
    return OUTBOUND


def outbound(original: Callable[..., Any]) -> Callable[..., Any]:
    """An outbound request: a block stage while it is in flight."""
    if inspect.iscoroutinefunction(original):

        async def send_async(*args: Any, **kwargs: Any) -> Any:
            timeline = read_timeline()
            if timeline is None or _measuring():
                return await original(*args, **kwargs)
            token = _collector.set_outside_collection(_MEASURING, True)
            try:
                # Not `with`, which holds a bound __exit__ while the request is in flight (_stage.Stage.__call__).
                block = Stage(_block_name(timeline))
                block.__enter__()
                try:
                    result = await original(*args, **kwargs)
                except BaseException as exc:
                    block.__exit__(type(exc), exc, exc.__traceback__)
                    raise
                block.__exit__(None, None, None)
                return result
            finally:
                _collector.reset_unless_collected(_MEASURING, token)

        return send_async

    def send_sync(*args: Any, **kwargs: Any) -> Any:  # a sync client, in a thread that carries the request's context
        timeline = read_timeline()
        if timeline is None or _measuring():
            return original(*args, **kwargs)
        token = _collector.set_outside_collection(_MEASURING, True)
        try:
            with Stage(_block_name(timeline)):
                return original(*args, **kwargs)
        finally:
            _collector.reset_outside_collection(_MEASURING, token)

    return send_sync


def _timed_wait(awaitable: Awaitable[T], timeline: Timeline) -> Awaitable[T]:
    """A wait for more of a response's body, ``_MEASURING`` while it lasts: inside the LLM call or a
    hook stage a block stage (``_block_name``), else one call of the sum stage ``stream.wait``
    (``summed_call``: in C, one object a chunk and no coroutine frame)."""
    if _in_llm_call() or _in_hook_stage():
        return _block_wait(awaitable, timeline)
    timeline.attributes.pop(Attr.UPSTREAM_UNMEASURED, None)
    return _stage.summed_call(STREAM_WAIT_STAGE, awaitable, _MEASURING)


async def _block_wait(awaitable: Awaitable[T], timeline: Timeline) -> T:
    token = _collector.set_outside_collection(_MEASURING, True)
    try:
        with Stage(_block_name(timeline)):
            return await awaitable
    finally:
        _collector.reset_unless_collected(_MEASURING, token)


def body_wait(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A coroutine function that waits for more of a response's body."""

    @functools.wraps(original)
    def wait(*args: Any, **kwargs: Any) -> Awaitable[Any]:
        timeline = read_timeline()
        if timeline is None or _measuring():
            return original(*args, **kwargs)
        return _timed_wait(original(*args, **kwargs), timeline)

    return wait


def body_stream(original: Callable[..., AsyncGenerator[Any, None]]) -> Callable[..., AsyncGenerator[Any, None]]:
    """An async generator function over a response's body: each step is a wait."""

    async def timed(generator: AsyncGenerator[Any, None], timeline: Timeline) -> AsyncGenerator[Any, None]:
        try:
            while True:
                try:
                    item = await _timed_wait(generator.__anext__(), timeline)
                except StopAsyncIteration:
                    return
                yield item
        finally:
            await generator.aclose()

    @functools.wraps(original)
    def stream(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        generator = original(*args, **kwargs)
        timeline = read_timeline()
        if timeline is None or _measuring():  # read inside a measured send: already counted
            return generator
        return timed(generator, timeline)

    return stream


def awaited_stage(original: Callable[..., Awaitable[Any]], name: str) -> Callable[..., Awaitable[Any]]:
    """A coroutine function that returns the LLM call, unawaited (LiteLLM's
    ``route_request``): the call itself is the stage ``name``; awaiting what
    it returns is ``llm_call``, checked for coverage when it returns."""

    async def routed(*args: Any, **kwargs: Any) -> Any:
        timeline = read_timeline()
        if timeline is None:
            return await original(*args, **kwargs)
        try:
            data = kwargs["data"] if "data" in kwargs else args[0]
            model = data.get("model") if isinstance(data, dict) else None
            if isinstance(model, str):
                timeline.attributes[SemConv.GEN_AI_REQUEST_MODEL] = model
        except Exception as exc:  # perfkit's bug must never become the app's
            internal_error("transport.model", exc)
        with Stage(name):
            call = await original(*args, **kwargs)
        return _llm_call(call, timeline) if inspect.iscoroutine(call) else call

    return routed


async def _llm_call(call: Awaitable[T], timeline: Timeline) -> T:
    first = timeline.next_index
    token = _collector.set_outside_collection(_IN_LLM_CALL, True)
    try:
        block = Stage(LLM_CALL)  # not `with`, as in outbound()
        block.__enter__()
        try:
            result = await call
        except BaseException as exc:
            block.__exit__(type(exc), exc, exc.__traceback__)
            raise
        block.__exit__(None, None, None)
    finally:
        _collector.reset_unless_collected(_IN_LLM_CALL, token)
    try:
        _check_coverage(timeline, first)
        provider = _provider(result)
        if provider is not None:
            timeline.attributes[SemConv.GEN_AI_PROVIDER_NAME] = provider
    except Exception as exc:
        internal_error("transport.coverage", exc)
    return result


# LiteLLM's provider names whose convention name differs (gen_ai.provider.name's well-known values).
_PROVIDER_NAMES = {
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}


def _provider(result: Any) -> str | None:
    """The provider LiteLLM's router sent the call to: a response's hidden
    parameters (the provider, or the deployment's ``provider/model``), or a
    stream wrapper's attribute."""
    hidden = getattr(result, "_hidden_params", None)
    name = None
    if isinstance(hidden, dict):
        name = hidden.get("custom_llm_provider")
        deployed = hidden.get("litellm_model_name")  # "anthropic/claude-...": some handlers set only this
        if name is None and isinstance(deployed, str) and "/" in deployed:
            name = deployed.split("/", 1)[0]
    if name is None:
        name = getattr(result, "custom_llm_provider", None)
    return _PROVIDER_NAMES.get(name, name) if isinstance(name, str) and name else None


def _check_coverage(timeline: Timeline, first_index: int) -> None:
    """Flag what perfkit could not measure: an LLM call that waited on no
    upstream it saw (a client it does not wrap, or no provider at all: a
    cache hit, a mock response), or a request with no auth stage. A stream
    that sends its request when first read clears the flag then."""
    wait = timeline.generators.get(STREAM_WAIT_STAGE)
    if not (timeline.has_stage(UPSTREAM_STAGE, first_index) or (wait is not None and wait[0] >= first_index)):
        timeline.attributes[Attr.UPSTREAM_UNMEASURED] = True
    if not timeline.has_stage(AUTH):
        timeline.attributes[Attr.AUTH_UNMEASURED] = True
