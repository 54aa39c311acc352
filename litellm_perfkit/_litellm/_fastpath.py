"""Which of the proxy's fast paths a request takes, and why not.

Read from LiteLLM's own state without changing it: the callback-capability
cache where the version has one (the same cached call the proxy makes), or
``litellm.callbacks`` where it does not. Cached per callback list, like
LiteLLM's own cache, so a request pays a dict lookup.
"""

from __future__ import annotations

from typing import Any

from ..types import AttributeValue

__all__ = ["FastPaths"]

_HOOKS = (
    "async_post_call_streaming_iterator_hook",
    "async_post_call_streaming_hook",
    "async_pre_call_hook",
    "async_moderation_hook",
)


def _overrides(callback: Any, method: str) -> bool:
    from litellm.integrations.custom_logger import CustomLogger

    for klass in type(callback).__mro__:
        if klass is CustomLogger:
            return False
        if method in klass.__dict__:
            return True
    return False


class FastPaths:
    def __init__(self, version: str, table: str) -> None:
        self.version = version
        self.table = table
        self._cache: dict[tuple[int, tuple[int, ...]], dict[str, AttributeValue]] = {}

    def attributes(self) -> dict[str, AttributeValue]:
        import litellm

        callbacks = litellm.callbacks
        key = (len(callbacks), tuple(id(c) for c in callbacks))
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._compute(callbacks)
        return cached

    def _compute(self, callbacks: list[Any]) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            "perfkit.litellm.version": self.version,
            "perfkit.litellm.table": self.table,
        }
        resolved = self._resolve(callbacks)
        names = sorted({type(c).__name__ for c in resolved} | {c for c in callbacks if isinstance(c, str)})
        slow = sorted(
            {type(c).__name__ for c in resolved if any(_overrides(c, hook) for hook in _HOOKS) or _is_guardrail(c)}
        )
        attributes["perfkit.litellm.callbacks"] = ",".join(names)
        attributes["perfkit.litellm.slow_path_callbacks"] = ",".join(slow)
        try:
            from litellm.proxy.utils import ProxyLogging

            capabilities = getattr(ProxyLogging, "_callback_capabilities", None)
        except ImportError:
            capabilities = None
        if capabilities is not None:
            caps = capabilities()  # the proxy's own cached answer
            missing: list[str] = []

            def flag(name: str) -> bool:
                """A capability; one this version's cache lacks counts as off and is named."""
                if not hasattr(caps, name):
                    missing.append(name)
                return bool(getattr(caps, name, False))

            wrapped = flag("has_iterator_override")
            attributes["perfkit.litellm.stream_iterator"] = "wrapped" if wrapped else "direct"
            attributes["perfkit.litellm.stream_iterator_layers"] = (
                len(getattr(caps, "iterator_overrides", ())) if wrapped else 0
            )
            per_chunk = flag("has_streaming_chunk_override") or flag("has_guardrail")
            attributes["perfkit.litellm.per_chunk_hook"] = "on" if per_chunk else "off"
            pre = flag("has_guardrail") or flag("has_content_enforcer") or flag("has_pre_call_override")
            attributes["perfkit.litellm.pre_call_hooks"] = "run" if pre else "skipped"
            during = flag("has_guardrail") or flag("has_moderation_override")
            attributes["perfkit.litellm.during_call_hooks"] = "run" if during else "skipped"
            attributes["perfkit.litellm.fast_path_source"] = "callback_capabilities" + (
                f" (this version lacks {', '.join(sorted(set(missing)))})" if missing else ""
            )
        else:
            # No capability cache: every request walks litellm.callbacks, the
            # stream always goes through the iterator hook and the per-chunk hook.
            overriding = [c for c in resolved if _overrides(c, "async_post_call_streaming_iterator_hook")]
            attributes["perfkit.litellm.stream_iterator"] = "wrapped"
            attributes["perfkit.litellm.stream_iterator_layers"] = 1 + len(overriding)
            attributes["perfkit.litellm.per_chunk_hook"] = "on"
            attributes["perfkit.litellm.pre_call_hooks"] = "run"
            attributes["perfkit.litellm.during_call_hooks"] = "run"
            attributes["perfkit.litellm.fast_path_source"] = "litellm.callbacks (no fast paths in this version)"
        return attributes

    @staticmethod
    def _resolve(callbacks: list[Any]) -> list[Any]:
        """CustomLogger instances only. String entries are not resolved here:
        LiteLLM's resolver may create logger instances, a side effect perfkit
        must not have; they are reported by name."""
        from litellm.integrations.custom_logger import CustomLogger

        return [c for c in callbacks if isinstance(c, CustomLogger)]


def _is_guardrail(callback: Any) -> bool:
    try:
        from litellm.integrations.custom_guardrail import CustomGuardrail
    except ImportError:
        return False
    return isinstance(callback, CustomGuardrail)
