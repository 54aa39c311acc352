"""What the bench's measurements share: the parts started first, a phase's load, its records and its spans."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from .._load import LoadPlan, Workload, load_errors, run_load
from .._stop import Stopped
from ..types import LoadResult
from ._analysis import sampled_warning
from ._instances import EXPORT_DELAY_MS
from ._launch import Children, start_mock
from ._options import BenchError, BenchOptions
from ._receiver import SpanReceiver
from ._summary import Samples

__all__ = [
    "PHASES",
    "SPANS_WAIT_S",
    "Bench",
    "add_samples",
    "load",
    "phase",
    "received",
    "records",
    "set_up",
    "warmup_plan",
    "workload",
]

PHASES = (("nonstream", False), ("stream", True))
# The bench waits this long for the last of a phase's spans.
SPANS_WAIT_S = EXPORT_DELAY_MS / 1000 + 0.8


class Bench(NamedTuple):
    """What a bench starts before any proxy: a work folder, the span receiver, the children, the mock."""

    workdir: Path
    receiver: SpanReceiver
    children: Children
    upstream: str  # the mock's URL


@contextmanager
def set_up(options: BenchOptions, prefix: str) -> Iterator[Bench]:
    """The work folder, the receiver, the children and the mock, all stopped on leaving."""
    # The receiver outlives the children: a proxy stopped early still hands its last spans to it.
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        SpanReceiver() as receiver,
        Children() as children,
    ):
        yield Bench(Path(tmp), receiver, children, start_mock(children, *options.mock_flags()))


def workload(url: str, stream: bool, options: BenchOptions, instance_ports: tuple[int, ...] = ()) -> Workload:
    """The bench's requests: its model and keys, every request with its own trace id."""
    return Workload(
        url=url,
        models=((options.model, 1.0),),
        stream=stream,
        prompt_repeats=options.prompt_repeats,
        api_key=options.api_key,
        api_keys=options.api_keys,
        instance_ports=instance_ports,
    )


def load(requests: Workload, plan: LoadPlan, options: BenchOptions, jsonl: str | None = None) -> LoadResult:
    """``plan`` through the bench's driver; a stop signal during it goes on (``Stopped``): that load is not kept."""
    with load_errors(BenchError):
        result = run_load(
            requests,
            plan,
            processes=options.processes,
            progress=options.progress,
            jsonl_path=jsonl,
            driver=options.driver,
        )
    if not result["complete"]:
        raise Stopped(int(signal.Signals[result.get("stopped_by", "SIGINT")]))
    return result


def phase(
    url: str,
    stream: bool,
    duration: float,
    warmup: tuple[float, int],
    options: BenchOptions,
    jsonl: str | None = None,
    concurrency: int | None = None,
    instance_ports: tuple[int, ...] = (),
) -> LoadResult:
    """``duration`` seconds of the bench's load after ``warmup`` (seconds, or requests when given)."""
    if concurrency is None:
        concurrency = options.stream_concurrency if stream else options.concurrency
    plan = LoadPlan(
        concurrency=concurrency, duration_s=duration, warmup_s=warmup[0], warmup_requests=warmup[1], timeout_s=60
    )
    return load(workload(url, stream, options, instance_ports), plan, options, jsonl)


def warmup_plan(concurrency: int, options: BenchOptions) -> LoadPlan:
    """``--warmup`` as a load of its own, before bursts: its seconds, or its requests (4 per user when neither)."""
    seconds, requests = options.warmup_s, options.warmup_requests
    if not (seconds or requests):
        requests = 4 * concurrency
    return LoadPlan(
        concurrency=concurrency, duration_s=None if requests else seconds, requests=requests or None, timeout_s=60
    )


def records(jsonl: Path) -> list[dict[str, Any]]:
    """The driver's per-request records of a phase (none when it wrote none)."""
    return [orjson.loads(line) for line in jsonl.read_bytes().splitlines() if line] if jsonl.exists() else []


def add_samples(samples: Samples, sent: list[dict[str, Any]], stream: bool) -> None:
    """A phase's answered requests' latencies (a stream's TTFT and end; a response's end) added to ``samples``."""
    ok = [r for r in sent if r["error"] is None and r["end_ms"] is not None]
    if stream:
        samples["stream_ttft_ms"] += [r["first_token_ms"] for r in ok if r["first_token_ms"] is not None]
        samples["stream_e2e_ms"] += [r["end_ms"] for r in ok]
    else:
        samples["nonstream_latency_ms"] += [r["end_ms"] for r in ok]


def received(receiver: SpanReceiver, options: BenchOptions, trace_ids: set[str]) -> list[dict[str, Any]]:
    """The spans received since the phase began; a warning for bodies that did
    not decode, and for requests sent (``trace_ids``) that came back without spans."""
    spans = receiver.take()
    if receiver.rejected:
        options.say(
            f"warning: {receiver.rejected} OTLP request(s) from the proxy did not decode; their spans are missing from the breakdown"
        )
    sampled = sampled_warning(spans, trace_ids)
    if sampled:
        options.say(sampled)
    return spans
