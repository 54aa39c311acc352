"""The load driver against servers with known behaviour."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from litellm_perfkit._load import LoadPlan, Workload, run_load
from litellm_perfkit.mock import Deployment, MockConfig, ModelProfile
from tests.support.documents import validate
from tests.support.mock_server import mock_process, mock_server
from tests.support.servers import free_port


def profile_config(**profile: object) -> MockConfig:
    return MockConfig(default=ModelProfile(**profile).validate(), deployments=(Deployment("d", 0),), seed=1)  # type: ignore[arg-type]


def load(url: str, stream: bool = False, **plan: object) -> dict:  # type: ignore[type-arg]
    workload = Workload(url=url, stream=stream, prompt_repeats=2)
    result = run_load(
        workload,
        LoadPlan(**{"concurrency": 8, "duration_s": None, "requests": 100, "timeout_s": 5, **plan}),
        progress="off",
    )  # type: ignore[arg-type]
    validate(result, "load")
    return result


def test_streamed_counts_are_exact_and_no_timing_is_below_the_mocks() -> None:
    """What holds on a loaded machine: exact counts, and no first token or whole response sooner
    than the mock's configured times allow (less 1 ms: its timers have millisecond resolution)."""
    with mock_process("--ttft-ms", "30", "--itl-ms", "8", "--chunks", "12") as url:
        result = load(url, stream=True, requests=120)
    s = result["summary"]
    assert s["errors"] == 0 and s["ok"] == 120
    assert s["ttft_ms"]["p50"] >= 29 and s["e2e_ms"]["p50"] >= 30 + 11 * 8 - 1
    assert s["itl_ms"]["count"] == 120 * 11  # gaps between 12 content chunks; TTFT is not a gap
    assert s["output_tokens"] == {"total": 120 * 12, "per_s": s["output_tokens"]["per_s"], "source": "usage"}


@pytest.mark.quiet
@pytest.mark.integration
def test_ttft_itl_and_chunks_match_the_mock_within_a_millisecond() -> None:
    """Medians of 3 runs of 120 requests."""
    summaries, added = [], []
    with mock_process("--ttft-ms", "30", "--itl-ms", "8", "--chunks", "12") as url:
        for _ in range(3):
            result = load(url, stream=True, requests=120)
            summaries.append(result["summary"])
            added.append(result["ground_truth"]["added_delay_per_chunk_ms"]["p50"])

    def median(metric: str) -> float:
        return statistics.median(s[metric]["p50"] for s in summaries)

    assert all(s["errors"] == 0 for s in summaries)
    assert abs(median("ttft_ms") - 30) <= 1
    assert abs(median("itl_ms") - 8) <= 1
    # Not one of the +-1 ms quantities: the last chunk's timer (ms resolution
    # in uvloop) and the terminating chunk add up to ~1 ms more.
    assert abs(median("e2e_ms") - (30 + 11 * 8)) <= 2
    assert statistics.median(added) < 1


def test_role_only_first_chunk_is_not_the_first_token() -> None:
    # The mock sends its role chunk at once and content only at ttft: a driver
    # that took the role chunk as the first token would report ~0 ms.
    with mock_process("--ttft-ms", "40", "--chunks", "2") as url:
        result = load(url, stream=True, requests=20)
    assert result["summary"]["ttft_ms"]["p50"] >= 39


def test_processes_merge_counts_exactly() -> None:
    with mock_server(profile_config(chunks=3)) as (url,):
        result = run_load(
            Workload(url=url, prompt_repeats=2),
            LoadPlan(concurrency=4, duration_s=None, requests=90),
            processes=3,
            progress="off",
        )
        validate(result, "load")
    s = result["summary"]
    assert (s["requests"], s["ok"]) == (90, 90)
    assert result["histograms"]["latency"]["count"] == 90 and s["driver"]["processes"] == 3


@contextlib.contextmanager
def serve_protocol(factory: Callable[[], asyncio.Protocol]) -> Iterator[str]:
    """Serve ``factory``'s protocol on 127.0.0.1 from an event loop in a thread."""
    port = free_port()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(loop.create_server(factory, "127.0.0.1", port), loop).result(5)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@contextlib.contextmanager
def stalling_server(stall_at_s: float, stall_s: float) -> Iterator[str]:
    """Answers at once, except that its event loop freezes once for ``stall_s``."""
    state = {"first": 0.0, "stalled": False}
    body = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}'
    response = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)

    class Stall(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while b"\r\n\r\n" in self.buffer:
                head, _, rest = self.buffer.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(rest) < length:
                    return
                self.buffer = rest[length:]
                now = time.monotonic()
                state["first"] = state["first"] or now
                if not state["stalled"] and now - state["first"] > stall_at_s:
                    state["stalled"] = True
                    time.sleep(stall_s)  # a frozen server (GC pause, blocked loop)
                self.transport.write(response)  # type: ignore[attr-defined]

    with serve_protocol(Stall) as url:
        yield url


def test_open_loop_corrected_p99_shows_a_stall_that_uncorrected_hides() -> None:
    with stalling_server(stall_at_s=1.0, stall_s=1.0) as url:
        result = run_load(
            Workload(url=url, prompt_repeats=1),
            LoadPlan(rate=200, concurrency=4, duration_s=4.0, timeout_s=10),
            progress="off",
        )
    s = result["summary"]
    assert s["errors"] == 0
    assert s["latency_ms"]["p99"] > 500  # ~200 requests waited behind the stall
    assert s["latency_uncorrected_ms"]["p99"] < 100  # only the 4 in flight saw it
    assert s["latency_uncorrected_ms"]["max"] > 900


@contextlib.contextmanager
def raw_server(reply: bytes) -> Iterator[str]:
    """Sends ``reply`` to every request, then closes."""

    class Reply(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            if b"\r\n\r\n" in data:
                self.transport.write(reply)  # type: ignore[attr-defined]
                self.transport.close()

    with serve_protocol(Reply) as url:
        yield url


_EVENT = b"data: {not json at all\n\n"
MALFORMED_SSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    + b"%x\r\n%b\r\n0\r\n\r\n" % (len(_EVENT), _EVENT)
)


@pytest.mark.parametrize(
    ("error", "setup"),
    [
        ("http_429", {"error_429_fraction": 1.0}),
        ("http_5xx", {"error_500_fraction": 1.0}),
        ("timeout", {"timeout_fraction": 1.0}),
        ("disconnect", {"disconnect_fraction": 1.0}),
    ],
)
def test_error_classes_from_the_mock(error: str, setup: dict[str, float]) -> None:
    with mock_server(profile_config(**setup)) as (url,):
        result = load(url, stream=True, requests=6, concurrency=3, timeout_s=0.5)
    s = result["summary"]
    assert s["errors_by_class"] == {error: 6}
    assert result["errors"][error]["meaning"]
    assert s["requests"] == 6  # the run kept going


def test_connection_refused_and_malformed_sse() -> None:
    refused = load(f"http://127.0.0.1:{free_port()}", requests=3, concurrency=1)
    assert refused["summary"]["errors_by_class"] == {"connection_refused": 3}
    with raw_server(MALFORMED_SSE) as url:
        malformed = load(url, stream=True, requests=3, concurrency=1)
    assert malformed["summary"]["errors_by_class"] == {"malformed_sse": 3}
    assert "not json" in malformed["errors"]["malformed_sse"]["example"]
