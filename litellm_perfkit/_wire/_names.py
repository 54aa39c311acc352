"""Every name perfkit writes or reads across a boundary: HTTP headers, span
attributes, stages, metrics and result schemas. Code refers to these constants;
docs/headers.md and docs/telemetry.md define what each one means. Environment
variables have their own module, _environment_variables.py.

This module imports nothing: setup.py loads it by path, before the package can
be imported, to give the C accelerator the header names it reads (``C_HEADERS``)."""

from __future__ import annotations

__all__ = [
    "AFTER_RESPONSE_STAGE",
    "AFTER_RESPONSE_THREAD_STAGE",
    "EVENT_LOOP_STAGE",
    "OUTSIDE_WALL_STAGES",
    "PROTOCOL_STAGE",
    "STREAM_WAIT_STAGE",
    "THREAD_STAGE",
    "UPSTREAM_STAGE",
    "UPSTREAM_STAGES",
    "BENCH_SCHEMA",
    "CAPTURED_HEADERS",
    "CONTENT_TYPE_HEADER",
    "C_CONTENT_TYPES",
    "C_HEADERS",
    "EVENT_STREAM_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "HEADER_SECRET_HEADER",
    "LITELLM_OVERHEAD_HEADER",
    "LOAD_SCHEMA",
    "PERTURBATION_SCHEMA",
    "MOCK_PROCESSING_HEADER",
    "MOCK_RECEIVED_HEADER",
    "OVERHEAD_HEADER",
    "OVERHEAD_HEADERS",
    "PROFILE_HEADER",
    "PROFILE_ID_HEADER",
    "SERVER_TIMING_HEADER",
    "STAGE_METRIC_ATTRIBUTE",
    "TRACEPARENT_HEADER",
    "Attr",
    "Metric",
    "GEN_AI_OPERATIONS",
    "INSTRUMENTATION_SCOPE",
    "SemConv",
    "gen_ai_operation",
]

# -- HTTP headers (lowercase, as ASGI and HTTP/2 carry them) ------------------
OVERHEAD_HEADER = "x-perfkit-overhead-ms"
"""Written by PerfkitMiddleware: request received to headers sent, minus the upstream stages."""
SERVER_TIMING_HEADER = "server-timing"
TRACEPARENT_HEADER = "traceparent"
LITELLM_OVERHEAD_HEADER = "x-litellm-overhead-duration-ms"
"""LiteLLM's own overhead header (its definition, not perfkit's)."""
PROFILE_HEADER = "x-perfkit-profile"
"""A request carrying the configured secret here is profiled (docs/profiling.md)."""
PROFILE_ID_HEADER = "x-perfkit-profile-id"
HEADER_SECRET_HEADER = "x-perfkit-secret"
"""A request carrying the configured secret here gets perfkit's timing headers (docs/headers.md)."""
MOCK_RECEIVED_HEADER = "x-perfkit-mock-received-ns"
MOCK_PROCESSING_HEADER = "x-perfkit-mock-processing-ms"
CONTENT_TYPE_HEADER = "content-type"
EVENT_STREAM_CONTENT_TYPE = "text/event-stream"
"""A streamed response's content type (server-sent events), as a response's ``content-type`` starts."""
JSON_CONTENT_TYPE = "application/json"
"""A JSON body's content type (requests, non-streamed responses, OTLP/HTTP JSON)."""

OVERHEAD_HEADERS = (LITELLM_OVERHEAD_HEADER, OVERHEAD_HEADER)
"""The overhead headers a client reads, gateway's own and perfkit's."""
CAPTURED_HEADERS = (
    *OVERHEAD_HEADERS,
    SERVER_TIMING_HEADER,
    MOCK_RECEIVED_HEADER,
    MOCK_PROCESSING_HEADER,
    CONTENT_TYPE_HEADER,
    "retry-after",
)
"""Response headers the load drivers keep."""
C_HEADERS = {
    "TRACEPARENT": TRACEPARENT_HEADER,
    "SECRET": HEADER_SECRET_HEADER,
    "SERVER_TIMING": SERVER_TIMING_HEADER,
    "OVERHEAD": OVERHEAD_HEADER,
    "CONTENT_TYPE": CONTENT_TYPE_HEADER,
}
"""The headers the C accelerator reads or writes, by the name C gives each: ``PK_HEADER_<key>``
and ``PK_HEADER_<key>_LEN`` in the generated ``perfkit_layouts.h`` (``_core/_layouts.c_header``)."""
C_CONTENT_TYPES = {"EVENT_STREAM": EVENT_STREAM_CONTENT_TYPE}
"""The content types the C accelerator reads, likewise: ``PK_CONTENT_TYPE_<key>`` and ``PK_CONTENT_TYPE_<key>_LEN``."""

# -- stages perfkit itself records ----------------------------------------------
UPSTREAM_STAGE = "upstream"
"""Waiting on the upstream provider: the request, and body reads inside the LLM
call. PerfkitMiddleware leaves it out of the overhead by default."""
STREAM_WAIT_STAGE = "stream.upstream_wait"
"""Waiting on the upstream provider for a stream's chunks (_litellm/_transport.py)."""
UPSTREAM_STAGES = frozenset({UPSTREAM_STAGE, STREAM_WAIT_STAGE})
"""The stages that wait on the provider: time the gateway does not spend itself
(the LiteLLM instrumentation's, and the bench's upstream rows)."""
AFTER_RESPONSE_STAGE = "after_response"
"""The work a request's tasks did after its response ended (_core/_after.py):
outside the request's wall time, inside the CPU perfkit names."""
THREAD_STAGE = "threads"
"""Functions a request handed to a thread pool while it was served (_core/_threads.py)."""
AFTER_RESPONSE_THREAD_STAGE = f"{AFTER_RESPONSE_STAGE}.threads"
"""The same, handed over after the response ended: outside the request's wall time too."""
PROTOCOL_STAGE = "protocol"
"""The server's protocol work for a request on the event loop's thread, outside
the request's steps: parsing its bytes, mostly before the app saw it (_core/_protocol.py)."""
EVENT_LOOP_STAGE = "event_loop"
"""With ``PERFKIT_STEPS=cpu``: the event loop thread's CPU between one step's end
and the next step's start, charged to the request whose step follows (_core/_steps.py)."""
OUTSIDE_WALL_STAGES = frozenset({AFTER_RESPONSE_STAGE, AFTER_RESPONSE_THREAD_STAGE, PROTOCOL_STAGE, EVENT_LOOP_STAGE})
"""Stages outside the request's wall time (before it reached the app, after its
response, or the loop's work between steps): no part of its duration, overhead or
unattributed time, only of the CPU perfkit names."""

# -- result documents ----------------------------------------------------------
LOAD_SCHEMA = "perfkit.load/1"
BENCH_SCHEMA = "perfkit.bench/1"
PERTURBATION_SCHEMA = "perfkit.perturbation/1"


INSTRUMENTATION_SCOPE = "litellm_perfkit"
"""The OpenTelemetry instrumentation scope of perfkit's spans and metrics, whichever exporter sends them."""


class SemConv:
    """OpenTelemetry semantic-convention attribute keys perfkit writes (docs/telemetry.md)."""

    HTTP_REQUEST_METHOD = "http.request.method"
    HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
    HTTP_ROUTE = "http.route"
    URL_PATH = "url.path"
    URL_SCHEME = "url.scheme"
    SERVER_ADDRESS = "server.address"
    SERVER_PORT = "server.port"
    ERROR_TYPE = "error.type"
    GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
    GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
    GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
    # Resource attributes (the bench reads the pid back to tell workers apart).
    SERVICE_NAME = "service.name"
    SERVICE_INSTANCE_ID = "service.instance.id"
    PROCESS_PID = "process.pid"
    TELEMETRY_SDK_NAME = "telemetry.sdk.name"
    TELEMETRY_SDK_LANGUAGE = "telemetry.sdk.language"
    TELEMETRY_SDK_VERSION = "telemetry.sdk.version"


# A generative-AI endpoint (the path's ending) -> its gen_ai.operation.name.
GEN_AI_OPERATIONS = (
    ("/chat/completions", "chat"),
    ("/completions", "text_completion"),
    ("/embeddings", "embeddings"),
    ("/messages", "chat"),
    ("/responses", "chat"),
)


def gen_ai_operation(path: str) -> str | None:
    """The gen_ai.operation.name of a request path, None for any other endpoint."""
    for ending, operation in GEN_AI_OPERATIONS:
        if path.endswith(ending):
            return operation
    return None


class Attr:
    """Span attribute keys perfkit writes (docs/telemetry.md); readers use the same constants."""

    TOTAL_MS = "perfkit.total_ms"
    UPSTREAM_MS = "perfkit.upstream_ms"
    OVERHEAD_MS = "perfkit.overhead_ms"
    ATTRIBUTED_MS = "perfkit.attributed_ms"
    UNATTRIBUTED_MS = "perfkit.unattributed_ms"
    GC_PAUSE_MS = "perfkit.gc_pause_ms"
    # The app's time after its response's last byte, to its return (outside
    # the request's wall time, which ends at the last byte), and its CPU.
    AFTER_LAST_BYTE_MS = "perfkit.after_last_byte_ms"
    AFTER_LAST_BYTE_CPU_MS = "perfkit.after_last_byte.cpu_ms"
    STREAMING = "perfkit.streaming"
    # The requests the span's request stands for, itself included (RequestRecord.weight):
    # OpenTelemetry's adjusted count, as a span attribute (docs/telemetry.md#the-weighted-sample).
    ADJUSTED_COUNT = "perfkit.adjusted_count"
    CHUNKS = "perfkit.chunks"
    BODY_BYTES = "perfkit.body_bytes"
    STAGE_DURATION_MS = "perfkit.stage.duration_ms"
    STAGE_SELF_MS = "perfkit.stage.self_ms"
    STAGE_KIND = "perfkit.stage.kind"
    STAGE_ITEMS = "perfkit.stage.items"
    # CPU, event-loop queueing and I/O wait (they add up to the wall time):
    # of the request, of each stage, and of the request outside every stage.
    CPU_MS = "perfkit.cpu_ms"
    QUEUE_MS = "perfkit.queue_ms"
    IO_MS = "perfkit.io_ms"
    STAGE_CPU_MS = "perfkit.stage.cpu_ms"
    STAGE_QUEUE_MS = "perfkit.stage.queue_ms"
    STAGE_IO_MS = "perfkit.stage.io_ms"
    REMAINDER_CPU_MS = "perfkit.remainder.cpu_ms"
    REMAINDER_QUEUE_MS = "perfkit.remainder.queue_ms"
    REMAINDER_IO_MS = "perfkit.remainder.io_ms"
    # Queueing and I/O wait are each exact to within this (half the time a
    # step may or may not have been ready to run).
    UNCERTAIN_MS = "perfkit.uncertain_ms"
    STAGE_UNCERTAIN_MS = "perfkit.stage.uncertain_ms"
    REMAINDER_UNCERTAIN_MS = "perfkit.remainder.uncertain_ms"
    STEPS_DROPPED = "perfkit.steps_dropped"
    STREAM_MAX_GAP_MS = "perfkit.stream.max_gap_ms"
    STREAM_CHUNKS = "perfkit.stream.chunks"
    # Set (true) when perfkit could not measure a part of the request: an LLM
    # call with no upstream wait inside it, or an LLM request with no auth stage.
    UPSTREAM_UNMEASURED = "perfkit.upstream_unmeasured"
    AUTH_UNMEASURED = "perfkit.auth_unmeasured"
    LITELLM_PREFIX = "perfkit.litellm."
    # A metric attribute: whether the requests counted were recorded (sampled) or not.
    RECORDED = "perfkit.recorded"


class Metric:
    """Metric names perfkit exports (docs/telemetry.md): the OTLP names; Prometheus's families are derived from them.
    Not the OTel conventions' http.server.request.duration nor gen_ai.server.*: LiteLLM's otel callback and the
    FastAPI instrumentation emit those with other definitions, and series of one name must never mix in a backend."""

    REQUESTS = "perfkit.requests"
    REQUEST_DURATION = "perfkit.request.duration"
    LLM_REQUEST_DURATION = "perfkit.llm_request.duration"
    TIME_TO_FIRST_TOKEN = "perfkit.time_to_first_token"
    STAGE_DURATION = "perfkit.stage.duration"
    GC_PAUSE = "perfkit.gc.pause"
    REQUEST_OVERHEAD = "perfkit.request.overhead"
    # Requests perfkit could not fully measure (docs/litellm.md), by their span attribute.
    REQUESTS_UPSTREAM_UNMEASURED = "perfkit.requests.upstream_unmeasured"
    REQUESTS_AUTH_UNMEASURED = "perfkit.requests.auth_unmeasured"
    # Requests a full export queue dropped, and spans a failed export dropped.
    REQUESTS_DROPPED = "perfkit.requests.dropped"
    SPANS_DROPPED = "perfkit.spans.dropped"


STAGE_METRIC_ATTRIBUTE = "stage"
"""The attribute of ``Metric.STAGE_DURATION`` that names the stage (docs/telemetry.md)."""

AGENT_MODULE = "litellm_perfkit._export._agent"
"""The export agent's module: its process runs ``python -m`` this (the bench leaves it out of the proxy's CPU per request)."""
