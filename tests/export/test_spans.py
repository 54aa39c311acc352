"""A request record's spans: the server span's name and semantic-convention attributes."""

from __future__ import annotations

from litellm_perfkit._core._layouts import Span
from litellm_perfkit._export._spans import record_to_spans
from litellm_perfkit.types import RequestRecord, StageRecord


def server_span(**fields: object) -> tuple:  # type: ignore[type-arg]
    record = RequestRecord(start_ns=1_000, end_ns=2_000_000, method="POST", status=200, **fields)  # type: ignore[arg-type]
    return record_to_spans(record, "ab" * 16, "", 0)[0]


def test_the_server_span_is_named_by_its_route_template() -> None:
    routed = server_span(
        path="/openai/deployments/gpt/chat/completions",
        attributes={"http.route": "/openai/deployments/{model}/chat/completions"},
    )
    assert routed[3] == "POST /openai/deployments/{model}/chat/completions"
    assert server_span(path="/nowhere")[3] == "POST /nowhere"  # no route matched


def test_generative_ai_endpoints_carry_their_operation() -> None:
    for path, operation in (
        ("/v1/chat/completions", "chat"),
        ("/completions", "text_completion"),
        ("/v1/embeddings", "embeddings"),
        ("/v1/messages", "chat"),
        ("/responses", "chat"),
        ("/health", None),
    ):
        attributes = dict(server_span(path=path)[7])
        assert attributes.get("gen_ai.operation.name") == operation, path


def test_stage_span_ids_chosen_while_running_are_the_exported_ones() -> None:
    from litellm_perfkit._wire._headers import stage_span_id

    stages = (StageRecord("auth", 10_000, 20_000, -1), StageRecord("lookup", 12_000, 15_000, 0))
    spans = record_to_spans(
        RequestRecord(
            start_ns=1_000,
            end_ns=50_000,
            method="POST",
            path="/v1/chat/completions",
            span_context=("ab" * 16, "cd" * 8),
            stages=stages,
        ),
        "ab" * 16,
        "",
        0,
    )
    server, auth, lookup = spans
    assert server[1] == "cd" * 8
    assert auth[1] == stage_span_id("cd" * 8, "auth", 10_000) and auth[2] == server[1]
    assert lookup[1] == stage_span_id("cd" * 8, "lookup", 12_000) and lookup[2] == auth[1]


def test_the_c_stage_spans_are_the_python_ones() -> None:
    """The accelerator's stage_spans gives what the reference gives, tuple for tuple,
    on random records (every stage kind, nesting, splits with zero parts, open stages) and without a split."""
    import random

    import pytest

    from litellm_perfkit._core._timeline import decode
    from litellm_perfkit._export import _otlp, _spans
    from litellm_perfkit._export._split import time_split
    from tests.support.speedups import speedups
    from tests.support.timelines import sample_timeline

    stage_spans = speedups().stage_spans
    stage_spans_protobuf = speedups().stage_spans_protobuf
    for seed in range(200):
        rng = random.Random(seed)
        record = decode(sample_timeline(rng).encode())
        durations = [stage.duration_ns for stage in record.stages]
        own = _spans.exclusive_ns(record, durations)
        split = time_split(record)
        raw_ids = _spans._random_ids(len(record.stages))
        ids = _spans.hex_ids(raw_ids)
        for splits in (None if split is None else split.stages, None):
            args = (
                record.stages,
                durations,
                own,
                splits,
                ids,
                "a" * 32,
                "b" * 16,
                rng.randrange(-(10**12), 10**12),
                record.end_ns,
                _spans.STAGE_KEYS,
            )
            built = stage_spans(*args)
            assert built == _spans._stage_spans_python(*args), seed
            assert all(type(span) is Span for span in built)  # the NamedTuple, built by C too
            # Written straight to protobuf: the bytes the reference encodes (which takes no time before 1970).
            if all(span.start_unix_ns >= 0 and span.end_unix_ns >= 0 for span in built):
                encoded = _otlp._stage_spans_protobuf_python(*args)
                assert stage_spans_protobuf(*args) == encoded, seed
                assert stage_spans_protobuf(*args[:4], raw_ids, *args[5:]) == encoded, seed  # the ids as drawn, raw
    stage = StageRecord("auth", 1, 2, -1)
    with pytest.raises(ValueError):
        stage_spans((stage,), [1], [1], None, [], "a" * 32, "b" * 16, 0, 2, _spans.STAGE_KEYS)
    with pytest.raises(TypeError):
        stage_spans((stage,), [1], [1], [(1, 2)], ["c" * 16], "a" * 32, "b" * 16, 0, 2, _spans.STAGE_KEYS)
    for write in (stage_spans_protobuf, stage_spans):
        with pytest.raises(ValueError):
            write((stage,), [1], [1], None, [], "a" * 32, "b" * 16, 0, 2, _spans.STAGE_KEYS)
    with pytest.raises(ValueError):  # raw ids are 8 bytes each
        stage_spans_protobuf((stage,), [1], [1], None, b"1234567", "a" * 32, "b" * 16, 0, 2, _spans.STAGE_KEYS)
    with pytest.raises(TypeError):  # and the spans' tuples take them as hex
        stage_spans((stage,), [1], [1], None, b"12345678", "a" * 32, "b" * 16, 0, 2, _spans.STAGE_KEYS)
    # An id that is not hex of its size is declined: Python encodes it (and says what is wrong).
    assert stage_spans_protobuf((stage,), [1], [1], None, ["xyz"], "a" * 32, "b" * 16, 0, 2, _spans.STAGE_KEYS) is None


def test_the_server_span_carries_the_requests_it_stands_for() -> None:
    assert dict(server_span(path="/v1/chat/completions")[7])["perfkit.adjusted_count"] == 1
    assert dict(server_span(path="/v1/chat/completions", passed_by=41)[7])["perfkit.adjusted_count"] == 42
