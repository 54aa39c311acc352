"""Two releases measured side by side: both proxies up together against one
mock, pinned to one CPU, sent bursts of an exact request count at once
(``_together``).

A pair is one fresh start of both proxies; the machine's drift falls on both
alike, so their ratio is steady where samples taken minutes apart are not.
A proxy process keeps its own speed for its life (a few percent), which only
more pairs average: the statistics over pairs are in ``_pair_stats``.

Each side exports its spans to a receiver of its own, so each side's stages
(their own CPU per request) come from its own requests. With ``profile`` set,
each side runs the per-stage profiler (``PERFKIT_STAGE_PROFILE_DIR``) and
writes its profiles there when it stops.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from .._load import LoadPlan
from .._wire._environment_variables import (
    OTEL_BSP_SCHEDULE_DELAY,
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_SERVICE_NAME,
    PERFKIT_RECORD_RATE,
    PERFKIT_STAGE_PROFILE_DIR,
)
from ..types import AttributeValue
from ._analysis import OUTSIDE_STAGES, Breakdown, stage_breakdown
from ._bursts import Target, load
from ._launch import OFFLINE_ENV, Child, Children, free_port, port_open, process_tree, start_litellm, start_mock
from ._options import BenchError, BenchOptions, config_template
from ._receiver import SpanReceiver
from ._releases import release
from ._together import SendOrder, send_together
from ._venvs import VenvError

__all__ = [
    "PairMetric",
    "PairReading",
    "SideReading",
    "Sides",
    "Unavailable",
    "measure_pair",
    "pair_rounds",
    "stage_costs",
    "value",
]

PAIR_CPU = min(os.sched_getaffinity(0))
"""Once started, both proxies of a pair run on this one CPU: a process that the scheduler
keeps on another core than its partner's meets other neighbours there for its life."""


def _pin(pid: int) -> None:
    """Every thread of the process tree at ``pid`` onto ``PAIR_CPU`` (start-up ran on any)."""
    for member in process_tree(pid):
        for task in Path(f"/proc/{member}/task").glob("*"):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(task.name), {PAIR_CPU})


EXPORT_DELAY_MS = 200  # each side hands its spans over soon after its last burst
SPANS_WAIT_S = 1.0

Sides = Literal["lower", "upper"]
PairMetric = Literal["cpu", "rps"]


class SideReading(TypedDict):
    """One release over its bursts of one pair."""

    cpu_ms: float  # the proxy's process tree's CPU per request, export agents left out
    rps: float  # the requests over the bursts' wall time
    requests: int  # in its bursts
    served: int  # warm-up included: what its profile, if any, covers
    stages: dict[str, float]  # own CPU per request per stage (self time without step accounting)
    fast_paths: dict[str, AttributeValue]


class PairReading(TypedDict):
    first: Sides  # the side started first and sent the first burst
    lower: SideReading
    upper: SideReading
    # The median over rounds of log(upper / lower CPU per request), each round's bursts sent at once:
    # kept for diagnosis; the ratio is the totals' (``_pair_stats.log_ratio``), which a lumpy cost
    # (in fewer than half the rounds) does not escape.
    cpu_log_ratio: float | None


class Unavailable(Exception):
    """A release cannot be measured (it does not install here): a search goes around it; ``version`` says which."""

    def __init__(self, version: str, why: str) -> None:
        super().__init__(why)
        self.version = version


PAIR_BURST_S = 0.5
"""About how long one burst of a pair lasts: short, so the two sides' bursts, sent at once,
meet the same moments of the machine's load."""


def pair_rounds(options: BenchOptions) -> int:
    """Bursts per side in a pair: as many as fit in ``--duration`` at about ``PAIR_BURST_S`` each, at least 2."""
    return max(2, round(options.duration_s / PAIR_BURST_S))


def pair_burst(rps: float, concurrency: int) -> int:
    """Requests for a burst of about ``PAIR_BURST_S`` at ``rps``: whole waves, every user sending as many."""
    return max(1, round(rps * PAIR_BURST_S / concurrency)) * concurrency


@dataclass
class _Proxy:
    url: str
    child: Child


def _start(
    options: BenchOptions,
    package: str,
    version: str,
    pip_args: list[str],
    children: Children,
    receiver: SpanReceiver,
    upstream: str,
    workdir: Path,
    profile: Path | None,
) -> _Proxy:
    """One release's proxy, under perfkit, recording every request, its spans to ``receiver``."""
    try:
        where = release(package, version, pip_args, options.say)
    except VenvError as exc:
        raise Unavailable(version, str(exc)) from None
    env = {
        OTEL_SERVICE_NAME: f"perfkit-pair-{version}",
        PERFKIT_RECORD_RATE: "all",
        OTEL_BSP_SCHEDULE_DELAY: str(EXPORT_DELAY_MS),
    }
    if profile is not None:
        env[PERFKIT_STAGE_PROFILE_DIR] = str(profile)
    if package == "litellm":
        python = where.python
        template = Path(options.config).read_text() if options.config else config_template(options.provider)
        started = start_litellm(
            children,
            python.parent / "litellm",
            python.parent / "perfkit",
            template.replace("{upstream}", upstream),
            workdir,
            perfkit_args=("--endpoint", receiver.endpoint, "--protocol", "http/protobuf"),
            env=env,
            say=options.say,
        )
        return _Proxy(started.url, started.child)
    assert options.proxy_command is not None
    port = free_port()
    command = options.proxy_command.replace("{python}", str(where.python)).format(port=port, upstream=upstream)
    env.update({OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf"})
    for name, value in where.env.items():
        env[name] = os.pathsep.join(filter(None, (value, os.environ.get(name)))) if name == "PYTHONPATH" else value
    child = children.start(f"{package}-{version}", shlex.split(command), {**os.environ, **OFFLINE_ENV, **env}, workdir)
    child.wait_ready(lambda: port_open(port), timeout_s=180)
    return _Proxy(f"http://127.0.0.1:{port}", child)


def _warm(url: str, options: BenchOptions) -> tuple[float, int]:
    """The warm-up (``--warmup``, at least a few waves of requests); its requests per second and requests."""
    seconds, requests = options.warmup_s, options.warmup_requests
    if not (seconds or requests):
        requests = 4 * options.concurrency
    plan = LoadPlan(
        concurrency=options.concurrency,
        duration_s=None if requests else seconds,
        requests=requests or None,
        timeout_s=60,
    )
    summary = load(url, False, plan, options.prompt_repeats, options.processes)
    return float(summary["rps"]), int(summary["requests"])


def stage_costs(breakdown: Breakdown) -> dict[str, float]:
    """Each stage's own CPU per request (and outside every stage); its self time without step accounting."""
    stages = {name: s for name, s in breakdown["stages"].items() if not s["upstream"]}
    if not stages or any(s.get("cpu_ms") is None for s in stages.values()):
        return {name: round(s["mean_self_ms"], 4) for name, s in stages.items()}
    costs = {name: round(float(s["cpu_ms"] or 0.0), 4) for name, s in stages.items()}
    remainder = breakdown["remainder"]
    if remainder is not None and remainder.get("cpu_ms") is not None:
        costs[OUTSIDE_STAGES] = round(float(remainder["cpu_ms"] or 0.0), 4)
    return costs


def measure_pair(
    options: BenchOptions,
    package: str,
    versions: tuple[str, str],
    pip_args: list[str],
    first: Sides,
    profile: tuple[Path, Path] | None = None,
    sent_first: Sides | None = None,
    send_order: SendOrder = "fixed",
) -> PairReading:
    """One pair: ``versions`` (lower, upper) up together, ``first`` started first and
    bursting first (``sent_first``, ``send_order``: otherwise, ``benchmarks/pair_order.py``);
    the non-streaming path's CPU and RPS per side, and its stages.
    ``profile``: a directory per side for its per-stage profiles."""
    order: list[Sides] = ["lower", "upper"] if first == "lower" else ["upper", "lower"]
    index = {"lower": 0, "upper": 1}
    with (
        tempfile.TemporaryDirectory(prefix="perfkit-pair-") as tmp,
        SpanReceiver() as lower_spans,
        SpanReceiver() as upper_spans,
        Children() as children,
    ):
        receivers = {"lower": lower_spans, "upper": upper_spans}
        upstream = start_mock(children, *options.mock_flags())
        proxies: dict[str, _Proxy] = {}
        for side in order:
            version = versions[index[side]]
            options.say(f"starting {package} {version} ({side} side of the pair)")
            proxies[side] = _start(
                options,
                package,
                version,
                pip_args,
                children,
                receivers[side],
                upstream,
                Path(tmp),
                None if profile is None else profile[index[side]],
            )
        for proxy in proxies.values():
            _pin(proxy.child.process.pid)
        warmed = {side: _warm(proxies[side].url, options) for side in order}
        requests = pair_burst(min(rate for rate, _ in warmed.values()), options.concurrency)
        rounds = pair_rounds(options)
        time.sleep(SPANS_WAIT_S)
        for receiver in receivers.values():
            receiver.clear()
        sending = order if sent_first in (None, first) else order[::-1]
        targets = [Target(side, proxies[side].url, proxies[side].child.process.pid) for side in sending]
        options.say(f"{rounds} bursts of {requests} requests on each side, sent to both at once")
        try:
            turns = send_together(
                targets,
                requests,
                options.concurrency,
                rounds,
                EXPORT_DELAY_MS / 1000 + SPANS_WAIT_S,
                options.prompt_repeats,
                send_order,
            )
        except RuntimeError as exc:
            raise BenchError(f"a pair of {package} {versions[0]} and {versions[1]}: {exc}") from None
        readings: dict[str, SideReading] = {}
        for side in order:
            spans = receivers[side].take()
            trace_ids = {span["trace_id"] for span in spans if span["kind"] == 2}
            breakdown = stage_breakdown(spans, trace_ids)
            got = turns.totals[side]
            if got.cpu_s is None or not got.requests:
                raise BenchError(f"{package} {versions[index[side]]}: no CPU reading of its process tree")
            own_cpu_s = got.cpu_s - (got.agent_cpu_s or 0.0)
            readings[side] = {
                "cpu_ms": round(own_cpu_s / got.requests * 1e3, 4),
                "rps": round(got.rps, 2),
                "requests": got.requests,
                "served": got.requests + warmed[side][1],
                "stages": stage_costs(breakdown),
                "fast_paths": breakdown["fast_paths"],
            }
        for side in reversed(order):
            children.stop(proxies[side].child)
    rounds_ratio = [
        math.log(b / a) for a, b in zip(turns.rounds["lower"], turns.rounds["upper"]) if a and b and a > 0 and b > 0
    ]
    return {
        "first": first,
        "lower": readings["lower"],
        "upper": readings["upper"],
        "cpu_log_ratio": round(statistics.median(rounds_ratio), 6) if rounds_ratio else None,
    }


def value(side: SideReading, metric: PairMetric) -> float:
    """The metric of one side: its CPU per request (ms) or its requests per second."""
    return side["cpu_ms"] if metric == "cpu" else side["rps"]
