from __future__ import annotations

from litellm_perfkit._core._timeline import Timeline


def full_timeline() -> Timeline:
    timeline = Timeline(1_000_000_000_000, "POST", "/v1/chat/completions")
    timeline.finished += [(0, "auth", 1_000_000_001_000, 1_000_000_002_000, -1), (2, "upstream", 1_000_000_003_000, 1_000_000_009_000, 1)]
    timeline.generators["stream.iterate"] = [1, 1_000_000_002_500, 1_000_000_010_000, -1, 4_000, 21, "generator"]
    timeline.next_index = 3
    timeline.marks.update(headers_sent=1_000_000_004_000, first_token=1_000_000_005_000, last_byte=1_000_000_010_000)
    timeline.chunks, timeline.body_bytes, timeline.status, timeline.streaming = 21, 1234, 200, True
    timeline.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    timeline.error = "client_disconnected"
    timeline.attributes.update({"litellm.fast_path": True, "workers": 2, "ratio": 0.5, "model": "gpt-x"})
    timeline.upstream = frozenset({"upstream", "llm_call"})
    timeline.end_ns = 1_000_000_011_000
    return timeline


def test_encode_and_decode_keep_every_field() -> None:
    timeline = full_timeline()
    encoded = timeline.encode()
    assert encoded[:1] == b"["  # the JSON form
    assert Timeline.decode(encoded).freeze() == timeline.freeze()


def test_a_value_json_cannot_hold_falls_back_to_marshal() -> None:
    timeline = full_timeline()
    timeline.attributes["huge"] = 1 << 70  # past orjson's 64-bit integers
    encoded = timeline.encode()
    assert encoded[:1] != b"["
    assert Timeline.decode(encoded).freeze() == timeline.freeze()
