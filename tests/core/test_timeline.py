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
    timeline.upstream = ("llm_call", "upstream")
    timeline.end_ns = 1_000_000_011_000
    return timeline


def test_encode_and_decode_keep_every_field() -> None:
    timeline = full_timeline()
    assert Timeline.decode(timeline.encode()).freeze() == timeline.freeze()


def test_values_json_would_lose_are_kept() -> None:
    timeline = full_timeline()
    timeline.attributes.update(huge=1 << 70, infinite=float("inf"), surrogate="\ud800")
    assert Timeline.decode(timeline.encode()).freeze() == timeline.freeze()
