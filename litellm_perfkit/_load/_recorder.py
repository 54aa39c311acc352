"""Turn finished exchanges into histograms and counters (and optional JSONL).

Every latency is kept twice: from the intended start (corrected for
coordinated omission) and from the actual send (uncorrected). See docs/metrics.md.
"""

from __future__ import annotations

from collections import Counter
from typing import IO, Any

import orjson

from .._wire._headers import parse_server_timing
from .._wire._names import LITELLM_OVERHEAD_HEADER, MOCK_PROCESSING_HEADER, OVERHEAD_HEADERS, SERVER_TIMING_HEADER
from ._exchange import Exchange
from ._hdr import Histogram

__all__ = ["Recorder"]


def _ms_to_ns(text: str) -> int | None:
    try:
        return int(float(text) * 1e6)
    except ValueError:
        return None


class Recorder:
    def __init__(self, jsonl: IO[bytes] | None = None, start_ns: int = 0) -> None:
        self.histograms: dict[str, Histogram] = {}
        self.errors: Counter[str] = Counter()
        self.error_examples: dict[str, str] = {}
        self.requests = 0
        self.ok = 0
        self.output_tokens = 0
        self.token_sources: Counter[str] = Counter()
        self.jsonl = jsonl
        self.jsonl_error: OSError | None = None  # the write that failed (a full disk): no line after it
        self.start_ns = start_ns

    def hist(self, name: str) -> Histogram:
        histogram = self.histograms.get(name)
        if histogram is None:
            histogram = self.histograms[name] = Histogram()
        return histogram

    def record(self, x: Exchange, streaming: bool) -> None:
        self.requests += 1
        if x.sent_ns:
            self.hist("schedule_lag").record(x.sent_ns - x.intended_ns)
        if x.error is not None:
            self.errors[x.error] += 1
            self.error_examples.setdefault(x.error, x.detail[:200])
        else:
            self.ok += 1
            self.hist("latency").record(x.end_ns - x.intended_ns)
            self.hist("latency_uncorrected").record(x.end_ns - x.sent_ns)
            tokens, source = x.output_tokens
            self.output_tokens += tokens
            self.token_sources[source] += 1
            if streaming:
                self.hist("e2e").record(x.end_ns - x.intended_ns)
                if x.first_token_ns:
                    self.hist("ttft").record(x.first_token_ns - x.intended_ns)
                    self.hist("ttft_uncorrected").record(x.first_token_ns - x.sent_ns)
                itl = self.hist("itl")
                times = x.token_times
                for before, after in zip(times, times[1:]):
                    itl.record(after - before)
            self._headers(x)
            self._ground_truth(x)
        if self.jsonl is not None:
            self._write_line(x)

    def _headers(self, x: Exchange) -> None:
        for name in (*OVERHEAD_HEADERS, MOCK_PROCESSING_HEADER):
            value = x.headers.get(name)
            if value is not None and (ns := _ms_to_ns(value)) is not None:
                self.hist(f"header:{name}").record(ns)
        timing = x.headers.get(SERVER_TIMING_HEADER)
        if timing:
            for stage, ms in parse_server_timing(timing).items():
                self.hist(f"server_timing:{stage}").record(int(ms * 1e6))

    def _ground_truth(self, x: Exchange) -> None:
        """From the mock's send stamps: what happened between mock and client."""
        if not x.stamps:
            return
        first_sent, first_arrived = x.stamps[0]
        if x.first_token_ns:
            self.hist("gateway_added_ttft").record(x.first_token_ns - first_sent)
        added = self.hist("added_delay_per_chunk")
        for sent, arrived in x.stamps:
            added.record(arrived - sent)

    def _write_line(self, x: Exchange) -> None:
        assert self.jsonl is not None
        base = x.intended_ns

        def rel(t: int) -> float | None:
            return round((t - base) / 1e6, 4) if t else None

        line: dict[str, Any] = {
            "trace_id": x.trace_id,
            "model": x.model,
            "intended_ms": round((base - self.start_ns) / 1e6, 4),
            "sent_ms": rel(x.sent_ns),
            "headers_ms": rel(x.headers_ns),
            "first_byte_ms": rel(x.first_byte_ns),
            "first_token_ms": rel(x.first_token_ns),
            "end_ms": rel(x.end_ns),
            "status": x.status,
            "error": x.error,
            "chunks": len(x.token_times),
            "output_tokens": x.output_tokens[0],
            "max_gap_ms": round(max((b - a for a, b in zip(x.token_times, x.token_times[1:])), default=0) / 1e6, 4),
            "litellm_overhead_ms": x.headers.get(LITELLM_OVERHEAD_HEADER),
        }
        try:
            self.jsonl.write(orjson.dumps(line) + b"\n")
        except OSError as exc:  # the measuring goes on; the caller says the file is incomplete
            self.jsonl, self.jsonl_error = None, exc

    # -- merge / serialize ----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "histograms": {k: h.to_dict() for k, h in self.histograms.items()},
            "errors": dict(self.errors),
            "error_examples": self.error_examples,
            "requests": self.requests,
            "ok": self.ok,
            "output_tokens": self.output_tokens,
            "token_sources": dict(self.token_sources),
        }

    def merge_dict(self, data: dict[str, Any]) -> None:
        for name, raw in data["histograms"].items():
            self.hist(name).merge(Histogram.from_dict(raw))
        self.errors.update(data["errors"])
        for k, v in data["error_examples"].items():
            self.error_examples.setdefault(k, v)
        self.requests += data["requests"]
        self.ok += data["ok"]
        self.output_tokens += data["output_tokens"]
        self.token_sources.update(data["token_sources"])
