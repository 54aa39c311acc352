"""Which of the proxy's fast paths a request takes, and why not.

Read from LiteLLM's own state without changing it: the callback-capability
cache where the version has one (the same cached call the proxy makes), or
``litellm.callbacks`` where it does not. Cached per callback list, like
LiteLLM's own cache, so a request pays a dict lookup.
"""

from __future__ import annotations

from typing import Any, Literal

from .._wire._names import Attr
from ..types import AttributeValue

__all__ = ["CAPABILITY_FIELDS", "FastPath", "FastPaths", "Reading", "read_capabilities"]

FastPath = Literal["stream_iterator", "per_chunk_hook", "pre_call_hooks", "during_call_hooks"]
Reading = Literal[
    "version",
    "table",
    "callbacks",
    "slow_path_callbacks",
    "stream_iterator_layers",
    "capabilities_unread",
    "fast_path_source",
]
"""The other attributes beside the fast paths: what they were read from, and how."""

CAPABILITY_FIELDS: dict[str, dict[FastPath, tuple[str, ...]]] = {
    # 1.86-1.102 (older releases have no capability cache, and walk litellm.callbacks).
    "<1.103": {
        "stream_iterator": ("has_iterator_override",),
        "per_chunk_hook": ("has_streaming_chunk_override", "has_guardrail"),
        "pre_call_hooks": ("has_guardrail", "has_pre_call_override"),
        "during_call_hooks": ("has_guardrail",),
    },
    ">=1.103": {
        "stream_iterator": ("has_iterator_override",),
        "per_chunk_hook": ("has_streaming_chunk_override", "has_guardrail"),
        "pre_call_hooks": ("has_guardrail", "has_content_enforcer", "has_pre_call_override"),
        "during_call_hooks": ("has_guardrail", "has_moderation_override"),
    },
}
"""Per version table (``_points.TABLES``' ranges): the fields of LiteLLM's
callback-capability cache that decide each fast path, as that range's proxy
reads them: the path is taken unless one of them is set."""

_VALUES: dict[FastPath, tuple[str, str]] = {  # (a field set, none set)
    "stream_iterator": ("wrapped", "direct"),
    "per_chunk_hook": ("on", "off"),
    "pre_call_hooks": ("run", "skipped"),
    "during_call_hooks": ("run", "skipped"),
}
UNKNOWN = "unknown"


def _key(name: FastPath | Reading) -> str:
    """The span attribute key of a fast path or a reading."""
    return Attr.LITELLM_PREFIX + name


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


def read_capabilities(caps: Any, table: str) -> dict[str, AttributeValue]:
    """The fast-path attributes from a capability-cache entry, with the fields
    ``table``'s range reads. A field this release's cache lacks cannot be read
    (a release inside the range may predate it): it is named in
    ``capabilities_unread`` (absent when every field was read), and a path it
    decides, no other of its fields being set, is ``unknown``, not guessed."""
    attributes: dict[str, AttributeValue] = {}
    unread: set[str] = set()
    for path, fields in CAPABILITY_FIELDS[table].items():
        lacking = [name for name in fields if not hasattr(caps, name)]
        unread.update(lacking)
        taken, not_taken = _VALUES[path]
        if any(getattr(caps, name, False) for name in fields):
            attributes[_key(path)] = taken
        else:
            attributes[_key(path)] = UNKNOWN if lacking else not_taken
    wrapped = attributes[_key("stream_iterator")] == "wrapped"
    attributes[_key("stream_iterator_layers")] = len(getattr(caps, "iterator_overrides", ())) if wrapped else 0
    source = "callback_capabilities"
    if unread:
        attributes[_key("capabilities_unread")] = ",".join(sorted(unread))
        source += f" (this release's cache lacks {', '.join(sorted(unread))})"
    attributes[_key("fast_path_source")] = source
    return attributes


class FastPaths:
    def __init__(self, version: str, table: str) -> None:
        self.version = version
        self.table = table
        self._callbacks: list[Any] | None = None  # a copy of the litellm.callbacks _attributes describe
        self._attributes: dict[str, AttributeValue] = {}

    def attributes(self) -> dict[str, AttributeValue]:
        import litellm

        callbacks = litellm.callbacks
        # Read per recorded request. A list's == compares item by item, identity first, so a list
        # holding the same callbacks allocates nothing; a callback whose __eq__ says it equals
        # another would pass for it.
        if callbacks != self._callbacks:
            self._attributes = self._compute(callbacks)
            self._callbacks = list(callbacks)
        return self._attributes

    def _compute(self, callbacks: list[Any]) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            _key("version"): self.version,
            _key("table"): self.table,
        }
        resolved = self._resolve(callbacks)
        names = sorted({type(c).__name__ for c in resolved} | {c for c in callbacks if isinstance(c, str)})
        slow = sorted(
            {type(c).__name__ for c in resolved if any(_overrides(c, hook) for hook in _HOOKS) or _is_guardrail(c)}
        )
        attributes[_key("callbacks")] = ",".join(names)
        attributes[_key("slow_path_callbacks")] = ",".join(slow)
        try:
            from litellm.proxy.utils import ProxyLogging

            capabilities = getattr(ProxyLogging, "_callback_capabilities", None)
        except ImportError:
            capabilities = None
        if capabilities is not None:
            attributes.update(read_capabilities(capabilities(), self.table))  # the proxy's own cached answer
        else:
            # No capability cache: every request walks litellm.callbacks, the
            # stream always goes through the iterator hook and the per-chunk hook.
            overriding = [c for c in resolved if _overrides(c, "async_post_call_streaming_iterator_hook")]
            attributes[_key("stream_iterator")] = "wrapped"
            attributes[_key("stream_iterator_layers")] = 1 + len(overriding)
            attributes[_key("per_chunk_hook")] = "on"
            attributes[_key("pre_call_hooks")] = "run"
            attributes[_key("during_call_hooks")] = "run"
            attributes[_key("fast_path_source")] = "litellm.callbacks (no fast paths in this version)"
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
