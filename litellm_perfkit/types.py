"""Public types: the modes perfkit accepts and the records it produces.

Every timestamp is a ``time.perf_counter_ns()`` value (monotonic, per process).
Wall-clock time appears only when a record is exported, anchored once per batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

__all__ = [
    "ASGIApp",
    "Arrival",
    "AttributeValue",
    "BenchDeployment",
    "BenchHeadline",
    "BenchScenario",
    "BenchFlamegraph",
    "BenchResult",
    "BenchRun",
    "BenchSweepPairs",
    "CpuClock",
    "CpuTimerKind",
    "Distribution",
    "Driver",
    "FlamegraphFormat",
    "LoadResult",
    "Percentiles",
    "ExportMode",
    "ExporterName",
    "HeaderMode",
    "Mark",
    "Message",
    "OtlpProtocol",
    "Receive",
    "RecordRate",
    "PerturbationResult",
    "ProgressMode",
    "RequestRecord",
    "SamplerName",
    "Scope",
    "Send",
    "SpeedupsMode",
    "StepMode",
    "TraceparentMode",
    "StageKind",
    "StageRecord",
]

AttributeValue = str | int | float | bool

# The ASGI interface, as Starlette spells it (starlette.types): perfkit is pure
# ASGI and runs under any framework, so it declares the same shapes itself.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HeaderMode = Literal["trusted", "on", "off"]
"""Whether the middleware adds a timing header to a response. ``trusted``
(the default): to requests from loopback, or carrying perfkit's header secret
(``x-perfkit-secret``, ``PERFKIT_HEADER_SECRET``); ``on``: to every request;
``off``: to none. Timings tell a client how long auth took: docs/headers.md."""

ExporterName = Literal["otlp", "console", "jsonl", "sdk", "none"]
"""Where finished requests go (``OTEL_TRACES_EXPORTER`` plus perfkit's ``jsonl``)."""

ExportMode = Literal["process", "thread"]
"""``process``: spans are built and exported by a child agent process, so the
host pays a few microseconds per request. ``thread``: all in a thread of the host."""

SpeedupsMode = Literal["on", "off"]
"""``PERFKIT_SPEEDUPS``: ``on`` runs the request path's C accelerator when it
is built; ``off`` runs the pure-Python path (the reference)."""

TraceparentMode = Literal["sampled", "unsampled", "off"]
"""The W3C ``traceparent`` the load driver sends with each request: a fresh
trace, ``sampled`` (flag 01: perfkit records the request whatever its record
rate, as OpenTelemetry's parent-based samplers do), ``unsampled`` (flag 00:
the proxy's own record rate decides), or ``off`` (no header)."""

StepMode = Literal["on", "cpu", "off"]
"""Step accounting per request (CPU, event-loop queueing, I/O wait): ``on``
(default) times each step by the wall clock, so a step the OS preempts, or
one waiting for the GIL, counts that wait as CPU; ``cpu`` also reads the
thread's CPU clock around each step (two system calls a step) and counts
only that as CPU, the rest of the step as waiting to run (queueing);
``off`` does no step accounting."""

RecordRate = float | Literal["all"]
"""Recorded requests per second per process (``PERFKIT_RECORD_RATE``,
default 10), or ``all``: the others pass through unrecorded, only tallied (count, status, times)."""

OtlpProtocol = Literal["http/protobuf", "http/json", "grpc"]
"""``OTEL_EXPORTER_OTLP_PROTOCOL`` values."""

SamplerName = Literal[
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
]
"""``OTEL_TRACES_SAMPLER`` values perfkit understands."""

ProgressMode = Literal["auto", "on", "off"]
"""Progress bars of the load driver: ``auto`` shows them on a terminal."""

Driver = Literal["perfkit", "locust"]
"""The load client: perfkit's own, or Locust running perfkit's user."""

Arrival = Literal["constant", "poisson"]
"""Open-loop spacing of requests: fixed, or a Poisson process."""

Distribution = Literal["fixed", "uniform", "normal", "exponential", "lognormal"]
"""How the mock provider draws each delay around its mean."""

FlamegraphFormat = Literal["speedscope", "svg"]
"""The file py-spy writes: speedscope JSON or an SVG flamegraph."""

CpuClock = Literal["thread", "process"]
"""The CPU clock the per-stage profiler samples on: the event-loop thread's own, or the whole process's."""

CpuTimerKind = Literal["perf_event", "timer_create", "setitimer"]
"""What times the per-stage profiler's samples: a ``perf_event`` task clock (the thread's CPU, to the
nanosecond), a POSIX CPU timer (the thread's CPU, checked at the kernel's tick), or ``setitimer``
(the process's CPU, at the tick)."""

BenchFlamegraph = Literal["off", "speedscope", "svg"]
"""Whether ``perfkit bench`` records a flamegraph of the proxy, and in which format."""

BenchScenario = Literal["fake-endpoint", "rate-limited-deployments"]
"""The proxy's config in ``perfkit bench``: the benchmark page's one model at
the mock, or the 1K-RPS guide's two deployments of one model, each with an
rpm limit the router enforces (shared through Redis across instances)."""

BenchHeadline = Literal["plain", "recorded"]
"""Where ``perfkit bench``'s RPS, latency and proxy CPU come from: a proxy perfkit
does not touch, taking turns with the recorded one that gives the stages, or the
recorded proxy itself (under ``perfkit run``, every request recorded)."""

BenchDeployment = Literal["plain", "postgres", "postgres+redis"]
"""What ``perfkit bench`` runs beside the proxy: nothing (a master key), or a
private PostgreSQL for virtual keys and spend tracking, and a private Redis too."""

Mark = Literal["headers_sent", "first_body_byte", "first_token", "last_byte"]
"""Point-in-time events of one request after it was received (``start_ns``)."""

StageKind = Literal["block", "generator", "sum", "thread"]
"""``block``: one contiguous interval. ``generator``: the time an async generator
spent running its own code (suspensions excluded), summed over the request;
also ``event_loop``, the event loop's CPU between steps charged to the request
(``PERFKIT_STEPS=cpu``, _core/_steps.py), ``items`` = gaps charged.
``sum``: a function called many times per request (a per-chunk hook): its
calls' durations summed, ``items`` = calls. ``thread``: work on the request's
behalf outside its steps: functions it handed to a thread pool
(_core/_threads.py), or the server's parsing of it on the loop's thread
(_core/_protocol.py); ``self_ns`` is that work's CPU, the duration its calls'
wall time summed, ``items`` = calls."""


@dataclass(frozen=True)
class StageRecord:
    """One named stage of one request.

    ``start_ns``/``end_ns`` bound the stage in wall time. For ``generator`` stages
    they span first resume to last suspension, and ``self_ns`` is the time spent
    inside the generator's own code; ``duration_ns`` is what perfkit reports.
    """

    name: str
    start_ns: int
    end_ns: int
    parent: int  # index into RequestRecord.stages, -1 for a top-level stage
    kind: StageKind = "block"
    self_ns: int = 0
    items: int = 0
    intervals: tuple[int, ...] = ()
    """A ``sum`` stage's calls: start and end of each, flat; a ``thread``
    stage's: start, end and the thread's CPU of each, flat."""

    @property
    def duration_ns(self) -> int:
        if self.kind == "block":
            return self.end_ns - self.start_ns
        if self.kind == "thread":
            return sum(self.intervals[1::3]) - sum(self.intervals[0::3])
        return self.self_ns


@dataclass
class RequestRecord:
    """A finished request, as exporters and listeners get it (never on the hot path).

    This declaration is also the request timeline's: every field but the
    derived ``stages`` is recorded on the hot path in this shape, and the
    timeline's slots, the C accelerator's struct, the hand-off to the export
    agent and the decoding back into this record all come from it
    (``_core/_fields.py``). A number or flag starts at 0.
    """

    start_ns: int
    method: str = ""
    path: str = ""
    status: int = 0
    end_ns: int = 0
    """The request's end: its response's last byte handed to the server, or,
    with no last byte (an error before the response ended, a client gone),
    the app's return."""
    after_last_byte_ns: int = 0
    """The app's time after its response's last byte, to its return (its own
    code after the last ``send``: background tasks it awaits, cleanup): after
    ``end_ns``, outside the request's wall time. 0 without a last byte."""
    streaming: bool = False
    chunks: int = 0
    body_bytes: int = 0
    traceparent: str | None = None
    span_context: tuple[str, str] | None = None
    """(trace id, span id) of the request's span, when chosen while it ran: a
    host's OpenTelemetry tracing was active, and spans opened inside the
    request are this span's children. Otherwise chosen at export."""
    error: str | None = None
    marks: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    upstream_stages: tuple[str, ...] = ("upstream",)
    """Stages that wait on the upstream provider: not the gateway's own time.
    (``_wire._names.UPSTREAM_STAGE``: this module imports nothing of perfkit's,
    setup.py loads it by path; tests/wire/test_names.py keeps the two equal.)"""
    gc_pause_ns: int = 0
    """Garbage-collector pause time inside the request's wall time and ``after_last_byte_ns`` (docs/telemetry.md).
    While the request runs, the timeline holds the collector's total at its start here."""
    steps: list[int] = field(default_factory=list)
    """The request's task steps (its own and the tasks it started), four
    ``perf_counter_ns`` values each: early and late (the bounds of when the
    step became ready to run), start, end (``_core/_steps.py``)."""
    steps_dropped: int = 0
    """Steps past ``_core._steps.MAX_STEPS``, not recorded: the time split then covers part of the request."""
    passed_by: int = 0
    """Requests the record rate or ratio passed by unrecorded in this process
    since the one recorded before this: this record stands for them too
    (``weight``; docs/telemetry.md#the-weighted-sample)."""
    stages: tuple[StageRecord, ...] = field(default=(), metadata={"derived": True})
    """In the order they started; a stage still open at the end is left out."""

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def weight(self) -> int:
        """The requests this record stands for (OpenTelemetry's adjusted count): itself and ``passed_by``."""
        return 1 + self.passed_by

    @property
    def upstream_ns(self) -> int:
        """Time in stages that wait on the upstream provider (not the gateway's own)."""
        return sum(s.duration_ns for s in self.stages if s.name in self.upstream_stages)

    @property
    def overhead_ns(self) -> int:
        """Gateway time over the whole request: total minus upstream waits."""
        return max(0, self.duration_ns - self.upstream_ns)

    @property
    def ttft_ns(self) -> int | None:
        first = self.marks.get("first_token")
        return None if first is None else first - self.start_ns


# -- result documents ------------------------------------------------------------
# What `perfkit load` and `perfkit bench` write (--out). These declarations are
# the documents' schema: docs/schemas/*.json are generated from them
# (`perfkit schema load|bench`) and a test validates real runs against those.
# Times are milliseconds unless a name says otherwise.


class Percentiles(TypedDict):
    """A distribution (from perfkit's exact log-linear histograms)."""

    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    min: float
    mean: float
    count: int


class HistogramData(TypedDict):
    """A mergeable histogram: counts per log-linear bucket, in nanoseconds."""

    counts: dict[str, int]
    count: int
    total: int
    min: int
    max: int


class ToolInfo(TypedDict):
    name: str
    version: str


class LoadConfig(TypedDict, total=False):
    """The run's settings, as given (the Locust driver writes a subset)."""

    url: str
    models: list[list[str | float]]
    stream: bool
    max_tokens: int | None
    prompt_repeats: int
    mode: Literal["open", "closed"]
    concurrency: int | None
    rate: float | None
    arrival: str
    duration_s: float | None
    requests: int | None
    warmup_s: float
    warmup_requests: int
    ramp_s: float
    timeout_s: float
    seed: int | None
    processes: int
    repeats: int
    driver: Literal["perfkit", "locust"]


class OutputTokens(TypedDict):
    total: int
    per_s: float
    source: Literal["usage", "chunks"]


class DriverUsage(TypedDict):
    processes: int
    cpu_fraction: Annotated[float, "the driver's CPU time / wall time, per process"]
    cpu_s: float


class Spread(TypedDict):
    min: float
    median: float
    max: float


class _LoadSummaryFields(TypedDict):
    requests: int
    ok: int
    errors: int
    errors_by_class: dict[str, int]
    duration_s: Annotated[float, "the measured part, after warm-up"]
    rps: float
    latency_ms: Percentiles | None
    latency_uncorrected_ms: Percentiles | None
    ttft_ms: Percentiles | None
    ttft_uncorrected_ms: Percentiles | None
    itl_ms: Percentiles | None
    e2e_ms: Percentiles | None
    schedule_lag_ms: Percentiles | None
    output_tokens: OutputTokens
    driver: DriverUsage
    flags: Annotated[list[str], "warnings: the driver fell behind or was saturated, requests failed"]


class LoadSummary(_LoadSummaryFields, total=False):
    rps_spread: Annotated[Spread, "with repeats"]


class GroundTruth(TypedDict):
    gateway_added_ttft_ms: Percentiles | None
    added_delay_per_chunk_ms: Percentiles | None


class ErrorInfo(TypedDict):
    count: int
    meaning: str
    example: str


class LocustEntry(TypedDict):
    type: str
    name: str
    requests: int
    failures: int
    mean_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None


class _LoadResultFields(TypedDict):
    schema: Literal["perfkit.load/1"]
    complete: Annotated[
        bool, "false when a signal (Ctrl-C, SIGTERM, SIGHUP) stopped the run: it holds what was measured until then"
    ]
    tool: ToolInfo
    config: LoadConfig
    summary: LoadSummary
    headers: Annotated[dict[str, Percentiles], "per overhead or mock header"]
    server_timing: Annotated[dict[str, Percentiles], "per Server-Timing metric"]
    ground_truth: GroundTruth
    errors: dict[str, ErrorInfo]
    histograms: dict[str, HistogramData]


class LoadResult(_LoadResultFields, total=False):
    """``perfkit load --out`` (schema ``perfkit.load/1``); docs/metrics.md defines every number."""

    repeats: Annotated[list[LoadSummary], "with repeats: every run's summary (this document is the median run)"]
    locust: Annotated[list[LocustEntry], "with the Locust driver: Locust's own entries"]
    stopped_by: Annotated[str, "the signal that stopped an incomplete run"]


class P50P95(TypedDict):
    p50: float | None
    p95: float | None


class P50P95P99(TypedDict):
    p50: float | None
    p95: float | None
    p99: float | None


class BenchNonStream(TypedDict):
    rps: float
    latency_ms: P50P95P99
    client_overhead_ms: Annotated[dict[str, float], "proxy minus direct latency, p50 and p95"]
    litellm_overhead_header_ms: P50P95 | None
    errors: int


class BenchStream(TypedDict):
    ttft_ms: P50P95
    ttft_added_ms: Annotated[dict[str, float], "proxy minus direct TTFT, p50 and p95"]
    full_stream_ms: P50P95
    streams_per_s: float
    errors: int


class BenchDirect(TypedDict):
    latency_ms: P50P95
    ttft_ms: P50P95
    rps: float


class MeanP50P95(TypedDict):
    mean: float
    p50: float
    p95: float


class BenchStage(TypedDict):
    p50_ms: float
    p95_ms: float
    mean_self_ms: Annotated[float, "exclusive time per request, mean"]
    share: Annotated[float | None, "of the mean server-side overhead; null for upstream stages"]
    requests: int
    upstream: bool
    cpu_ms: Annotated[
        float | None, "own CPU per request, mean (the stage's code running); null without step accounting"
    ]
    queue_ms: Annotated[float | None, "own event-loop queueing per request, mean (ready to run, the loop busy)"]
    io_ms: Annotated[float | None, "own I/O wait per request, mean (waiting on sockets, timers, locks)"]


class Remainder(TypedDict):
    mean_ms: float
    share: float | None
    cpu_ms: Annotated[float | None, "CPU per request outside every stage, mean"]
    queue_ms: Annotated[float | None, "event-loop queueing per request outside every stage, mean"]
    io_ms: Annotated[float | None, "I/O wait per request outside every stage, mean"]


class Unmeasured(TypedDict):
    """Requests perfkit could not fully measure (span attributes
    perfkit.upstream_unmeasured and perfkit.auth_unmeasured). Those without a
    measured upstream are kept out of the overhead figures."""

    upstream: int
    auth: int


class GcPauses(TypedDict):
    mean: float
    p95: float
    max: float
    share: float | None


class ProxyUsage(TypedDict):
    cpu_percent: float | None
    rss_mb: float | None
    cpu_ms_per_request: Annotated[
        dict[str, float] | None,
        "proxy process-tree CPU over each phase's measured part (perfkit's export agents left out), per request sent in it, "
        "by phase (nonstream, stream); none with a warm-up in requests",
    ]
    steps_cpu_ms_per_request: Annotated[
        dict[str, float] | None,
        "the requests' own CPU (step accounting: their tasks' steps, their thread calls, their work after the response), mean per "
        "request by phase; the rest of cpu_ms_per_request ran outside any request's steps (the server's protocol work, the event loop)",
    ]
    named_cpu_ms_per_request: Annotated[
        dict[str, float] | None,
        "the part of steps_cpu_ms_per_request inside named stages (less the CPU outside every stage), mean per request by phase",
    ]
    agent_cpu_ms_per_request: Annotated[
        dict[str, float] | None,
        "perfkit's export agents alone over the same part of each phase, per request, by phase: what exporting costs beside "
        "cpu_ms_per_request (0 for a gateway that exports from its own process); none with a warm-up in requests",
    ]


class IdleOverhead(TypedDict):
    """One user on the proxy after the measured phases: the overhead a request
    pays with no other request to wait for (the phases' figures include
    queueing behind the other users)."""

    requests: int
    latency_ms: P50P95
    client_overhead_ms: Annotated[dict[str, float], "p50 and p95, idle latency minus direct (empty without data)"]
    server_overhead_ms: MeanP50P95 | None


class BenchDriver(TypedDict):
    name: str
    processes: int
    cpu_fraction: float
    cpu_s: float


class BenchSpread(TypedDict):
    rps: Spread
    streams_per_s: Spread


class BenchSamples(TypedDict):
    """Per-request values, one list per repeat (what perfkit compare resamples)."""

    nonstream_latency_ms: list[list[float]]
    stream_ttft_ms: list[list[float]]
    stream_e2e_ms: list[list[float]]
    server_overhead_ms: list[list[float]]
    stage_self_ms: dict[str, list[list[float]]]
    stage_cpu_ms: Annotated[
        dict[str, list[list[float]]], "each stage's own CPU per request (step accounting); empty without it"
    ]
    rps_repeats: list[float]
    streams_per_s_repeats: list[float]


class BenchDeploymentInfo(TypedDict):
    """What ran beside the proxy (``--deployment``) and what it recorded."""

    mode: BenchDeployment
    description: str
    startup_s: Annotated[dict[str, float], "each part's start: database client, postgres, schema, redis, proxy"]
    spend_log_rows: Annotated[int | None, "rows in LiteLLM_SpendLogs once the batch writer settled; none when plain"]
    spend_log_successes: Annotated[
        int | None, "of those, the rows of answered requests (status success); none when plain"
    ]
    answered: Annotated[
        int | None,
        "chat requests the proxies answered 200, warm-ups and idle phase included (perfkit's tally, every instance); none when plain",
    ]


class BenchKeyStage(TypedDict):
    stage: str
    master_ms: Annotated[float, "mean own CPU per request with the master key"]
    virtual_ms: Annotated[float, "mean own CPU per request with the virtual key"]
    difference_ms: float
    low_ms: Annotated[float | None, "bootstrap 95% interval of virtual - master (perfkit compare's)"]
    high_ms: float | None
    verdict: Literal["noise", "worse", "better", "n/a"]


class BenchKeys(TypedDict):
    """With a database: the load alternates the master key and a virtual key
    request by request (by trace id), and each stage's own CPU per request is
    compared between the two."""

    requests: Annotated[dict[Literal["master", "virtual"], int], "joined requests per key, every repeat"]
    stages: Annotated[list[BenchKeyStage], "auth first, then every stage whose interval excludes 0"]


class BenchInstance(TypedDict):
    url: str
    answered: Annotated[dict[str, int], "chat requests answered, by status code (perfkit's tally)"]


class BenchMinute(TypedDict):
    minute: Annotated[str, "UTC, HH:MM, by the driver's send time"]
    ok: int
    rate_limited: Annotated[int, "answered 429"]


class BenchRateLimits(TypedDict):
    """``--scenario rate-limited-deployments``: what the shared limits let through."""

    deployments: int
    rpm_per_deployment: int
    minutes: list[BenchMinute]
    held: Annotated[
        bool,
        "every minute's 200s within deployments x rpm, plus the users in flight across a minute's boundary",
    ]


class BenchCostSide(TypedDict):
    rps: Annotated[float, "requests answered over the side's bursts' wall time"]
    cpu_ms_per_request: Annotated[
        float | None,
        "the proxy's process tree, perfkit's export agents included, from each of its bursts' start to its next "
        "(the last: until its spans were in), per request (null without /proc)",
    ]
    agent_cpu_ms_per_request: Annotated[float | None, "perfkit's export agents alone (0 for the plain proxy)"]


class BenchCostPhase(TypedDict):
    burst_requests: Annotated[int, "requests in each burst, the same on both proxies"]
    rounds: Annotated[int, "pairs: one burst on each proxy, back to back (order ABBA), over every repeat"]
    plain: BenchCostSide
    recorded: BenchCostSide
    cpu_ratio: Annotated[Ratio | None, "CPU per request, recorded / plain, over the rounds (null without /proc)"]
    rps_ratio: Annotated[Ratio, "RPS, recorded / plain, over the rounds"]


class BenchCost(TypedDict):
    """What perfkit cost the proxy in this run: the recorded proxy against the plain one, measured in the same bursts."""

    record_rate: Annotated[str, "what the recorded proxy records: all (every request; the attribution joins each)"]
    nonstream: BenchCostPhase | None
    stream: BenchCostPhase | None


_HEADLINE = (
    "which proxy gave RPS, latency and the proxy's CPU: plain (one perfkit does not touch, beside the recorded one that "
    "gave the stages) or recorded (under perfkit run, every request recorded); absent: recorded"
)
_PERFKIT_COST = "with headline plain: perfkit's own cost in this run"


class _BenchRunFields(TypedDict):
    target: str
    litellm_version: str | None
    workers: int
    repeats: int
    spread: BenchSpread
    nonstream: BenchNonStream
    stream: BenchStream
    direct: BenchDirect
    server_overhead_ms: MeanP50P95 | None
    stages: dict[str, BenchStage]
    remainder: Remainder | None
    gc_pause_ms: GcPauses | None
    fast_paths: dict[str, AttributeValue]
    joined_requests: int
    unmeasured: Unmeasured
    workers_seen: int | None
    proxy: ProxyUsage
    idle: Annotated[IdleOverhead | None, "none with --idle 0"]
    driver: BenchDriver
    samples: BenchSamples
    flamegraph: str | None


class _BenchRunOptionalFields(TypedDict, total=False):
    locust: Annotated[dict[str, list[LocustEntry]], "with the Locust driver: its entries per phase"]
    deployment: Annotated[BenchDeploymentInfo, "with --deployment postgres or postgres+redis"]
    keys: Annotated[BenchKeys, "with a database: the master key against a virtual key, stage by stage"]
    instances: Annotated[list[BenchInstance], "with --instances: every instance and what it answered"]
    rate_limits: Annotated[BenchRateLimits, "with --scenario rate-limited-deployments"]
    headline: Annotated[BenchHeadline, _HEADLINE]
    perfkit_cost: Annotated[BenchCost, _PERFKIT_COST]


class BenchRun(_BenchRunFields, _BenchRunOptionalFields):
    """One target (a LiteLLM version, a worker count) measured."""


class BenchSweepPairs(TypedDict):
    """One version of a sweep against its first, the proxy's CPU per non-streaming request
    compared in pairs (both proxies up together, bursts sent to both at once; docs/bench.md)."""

    baseline: str
    version: str
    ratio: Annotated[
        float, "version / baseline: the geometric mean of the pairs' ratios, each of its sides' totals (cpu_ms)"
    ]
    interval: Annotated[list[float], "its 95% interval, [low, high], from the pair noise pooled over the store"]
    difference_ms: Annotated[float, "version - baseline, CPU ms per request: the ratio applied to the baseline's mean"]
    difference_interval_ms: list[float]
    resolution: Annotated[float, "the interval's relative half-width: the smallest step this comparison resolves"]
    cpu_ms: Annotated[list[list[float]], "each pair's CPU per request, [baseline, version], ms (pairs reused included)"]


class _BenchResultFields(_BenchRunFields):
    schema: Literal["perfkit.bench/1"]
    complete: Annotated[bool, "false when a signal stopped the bench: the runs and repeats finished until then"]
    label: str
    tool: ToolInfo
    created_unix: int
    duration_s: float
    config: dict[str, Any]


class BenchResult(_BenchResultFields, _BenchRunOptionalFields, total=False):
    """``perfkit bench --out`` (schema ``perfkit.bench/1``): the first run's
    fields at the top, and every run in ``runs`` when there are several; docs/bench.md."""

    runs: list[BenchRun]
    sweep_pairs: Annotated[
        list[BenchSweepPairs], "with several --litellm-version: each version against the first, in pairs"
    ]
    stopped_by: Annotated[str, "the signal that stopped an incomplete bench"]


class PerturbationSide(TypedDict):
    rps: float
    cpu_ms_per_request: Annotated[
        float | None,
        "the proxy's process tree over its measured bursts and the export schedule after them, perfkit's export agent included",
    ]
    agent_cpu_ms_per_request: Annotated[float | None, "perfkit's export agents alone (0 for the plain proxy)"]


class PerturbationPair(TypedDict):
    order: Annotated[
        list[Literal["plain", "perfkit"]],
        "which side started first and had the first burst (pairs alternate; bursts within a pair take turns, ABBA)",
    ]
    nonstream: dict[Literal["plain", "perfkit"], PerturbationSide]
    stream: dict[Literal["plain", "perfkit"], PerturbationSide]


class Ratio(TypedDict):
    geometric_mean: Annotated[float, "perfkit / plain: the geometric mean of the pairs' ratios"]
    low: Annotated[float, "its 95% interval (bootstrap over the pairs)"]
    high: float
    median: Annotated[float, "the median of the pairs' ratios"]
    pairs: int


class PerturbationPhase(TypedDict):
    cpu_ratio: Annotated[Ratio | None, "CPU per request, perfkit / plain (null without /proc)"]
    rps_ratio: Ratio


class _PerturbationResultFields(TypedDict):
    schema: Literal["perfkit.perturbation/1"]
    complete: Annotated[bool, "false when a signal stopped it: the pairs finished until then"]
    tool: ToolInfo
    created_unix: int
    duration_s: float
    litellm_version: str | None
    workers: int
    config: dict[str, Any]
    pairs: list[PerturbationPair]
    nonstream: PerturbationPhase | None
    stream: PerturbationPhase | None


class PerturbationResult(_PerturbationResultFields, total=False):
    """``perfkit bench --perturbation --out`` (schema ``perfkit.perturbation/1``):
    the same proxy and config plain and under ``perfkit run``, both up, in
    interleaved bursts; pairs of fresh processes; docs/bench.md."""

    stopped_by: Annotated[str, "the signal that stopped it"]
