"""Fast-path attributes read from a capability cache, per version table, with fakes of the cache."""

from __future__ import annotations

from types import SimpleNamespace

from litellm_perfkit._litellm._fastpath import CAPABILITY_FIELDS, read_capabilities
from litellm_perfkit._litellm._points import TABLES


def caps_of_1_90(**set_: bool) -> SimpleNamespace:
    """The shape of LiteLLM 1.90.0's ``_CallbackCapabilities``: no content enforcer, no moderation flag."""
    fields = dict.fromkeys(
        (
            "has_post_call_response_headers",
            "has_iterator_override",
            "has_streaming_chunk_override",
            "has_guardrail",
            "has_pre_call_override",
        ),
        False,
    )
    return SimpleNamespace(**{**fields, **set_}, iterator_overrides=(), resolved_callbacks=())


def caps_of_1_103(**set_: bool) -> SimpleNamespace:
    caps = caps_of_1_90(**set_)
    caps.has_content_enforcer = set_.get("has_content_enforcer", False)
    caps.has_moderation_override = set_.get("has_moderation_override", False)
    return caps


def test_every_version_table_has_its_capability_fields() -> None:
    assert set(CAPABILITY_FIELDS) == set(TABLES)


def test_a_release_below_1_103_is_read_with_its_own_fields_and_nothing_is_unread() -> None:
    attributes = read_capabilities(caps_of_1_90(), "<1.103")
    assert attributes == {
        "perfkit.litellm.stream_iterator": "direct",
        "perfkit.litellm.stream_iterator_layers": 0,
        "perfkit.litellm.per_chunk_hook": "off",
        "perfkit.litellm.pre_call_hooks": "skipped",
        "perfkit.litellm.during_call_hooks": "skipped",
        "perfkit.litellm.fast_path_source": "callback_capabilities",
    }


def test_1_103_reads_the_content_enforcer_and_the_moderation_override() -> None:
    assert read_capabilities(caps_of_1_103(), ">=1.103")["perfkit.litellm.pre_call_hooks"] == "skipped"
    enforced = read_capabilities(caps_of_1_103(has_content_enforcer=True), ">=1.103")
    assert enforced["perfkit.litellm.pre_call_hooks"] == "run"
    moderated = read_capabilities(caps_of_1_103(has_moderation_override=True), ">=1.103")
    assert moderated["perfkit.litellm.during_call_hooks"] == "run"
    assert "perfkit.litellm.capabilities_unread" not in moderated


def test_a_field_the_cache_lacks_is_named_and_what_it_decides_is_unknown() -> None:
    """A release inside a range whose cache predates a field (1.90's, read as >=1.103): no error."""
    attributes = read_capabilities(caps_of_1_90(), ">=1.103")
    assert attributes["perfkit.litellm.capabilities_unread"] == "has_content_enforcer,has_moderation_override"
    assert attributes["perfkit.litellm.pre_call_hooks"] == "unknown"
    assert attributes["perfkit.litellm.during_call_hooks"] == "unknown"
    assert attributes["perfkit.litellm.per_chunk_hook"] == "off"  # its fields were all read
    assert "lacks has_content_enforcer, has_moderation_override" in str(attributes["perfkit.litellm.fast_path_source"])


def test_a_field_that_is_set_decides_even_beside_one_that_cannot_be_read() -> None:
    attributes = read_capabilities(caps_of_1_90(has_guardrail=True), ">=1.103")
    assert attributes["perfkit.litellm.pre_call_hooks"] == "run"
    assert attributes["perfkit.litellm.during_call_hooks"] == "run"
    assert attributes["perfkit.litellm.per_chunk_hook"] == "on"


def test_an_empty_cache_object_names_every_field_and_raises_nothing() -> None:
    attributes = read_capabilities(object(), ">=1.103")
    assert set(str(attributes["perfkit.litellm.capabilities_unread"]).split(",")) == {
        name for fields in CAPABILITY_FIELDS[">=1.103"].values() for name in fields
    }
    assert attributes["perfkit.litellm.stream_iterator"] == "unknown"
    assert attributes["perfkit.litellm.stream_iterator_layers"] == 0


def test_the_stream_iterator_layers_are_the_overrides_when_wrapped() -> None:
    caps = caps_of_1_103(has_iterator_override=True)
    caps.iterator_overrides = ((object(), "override"), (object(), "apply_guardrail"))
    attributes = read_capabilities(caps, ">=1.103")
    assert attributes["perfkit.litellm.stream_iterator"] == "wrapped"
    assert attributes["perfkit.litellm.stream_iterator_layers"] == 2
