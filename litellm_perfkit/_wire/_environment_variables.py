"""Every environment variable perfkit reads or sets, declared once.

One constant per variable, named as the variable, with what it means; the
code refers to these constants and docs/configuration.md documents each one
(tests/wire/test_environment_variables.py checks both). Modelled on
OpenTelemetry's ``opentelemetry.sdk.environment_variables``.

Three families: perfkit's own ``PERFKIT_*``; the standard ``OTEL_*`` that
perfkit's exporter reads (each one also as ``PERFKIT_OTEL_*``, for perfkit
alone); and LiteLLM's own, read as a fallback or set for the proxy the bench
starts. Variables of Python or the OS (``PYTHONPATH``, ``NO_PROXY``) are not here.
"""

from __future__ import annotations

# -- perfkit: recording (the middleware and the request path) --------------------
PERFKIT_SPEEDUPS = "PERFKIT_SPEEDUPS"
"""``on`` (default) or ``off``: the request path in C, or in pure Python (_core/_backend.py)."""
PERFKIT_STEPS = "PERFKIT_STEPS"
"""``on`` (default) or ``off``: split each request's and stage's time into CPU,
event-loop queueing and I/O wait (_core/_steps.py)."""
PERFKIT_RECORD_RATIO = "PERFKIT_RECORD_RATIO"
"""The share of requests recorded at all, drawn when each starts: 0 to 1, default 1 (_core/_sampling.py)."""
PERFKIT_RECORD_RATE = "PERFKIT_RECORD_RATE"
"""``all``, or at most this many recorded requests a second per process; default 10 (_wire/_record_rate.py)."""
PERFKIT_RECORD_TRACED_RATE = "PERFKIT_RECORD_TRACED_RATE"
"""``all`` (default), or at most this many requests a second per process recorded because their
``traceparent`` is sampled, beyond ``PERFKIT_RECORD_RATE`` (_core/_sampling.py)."""
PERFKIT_HEADER_SECRET = "PERFKIT_HEADER_SECRET"
"""A request carrying this secret in ``x-perfkit-secret`` gets perfkit's timing headers
from any address (header mode ``trusted``); unset: loopback clients only."""
PERFKIT_SERVER_TIMING = "PERFKIT_SERVER_TIMING"
"""``perfkit run --server-timing``: ``trusted`` (default), ``on`` or ``off``."""
PERFKIT_OVERHEAD_HEADER = "PERFKIT_OVERHEAD_HEADER"
"""``perfkit run --overhead-header``: ``trusted`` (default), ``on`` or ``off``."""
PERFKIT_LEAVE_OUT = "PERFKIT_LEAVE_OUT"
"""Comma-separated parts of ``perfkit run`` left out, to measure what each costs (_core/_leave_out.py)."""
PERFKIT_EXTRA_STAGES = "PERFKIT_EXTRA_STAGES"
"""More LiteLLM stages: ``stage=module:attr[,stage2=module:Class.method]`` (_litellm/__init__.py)."""

# -- perfkit: export -------------------------------------------------------------
PERFKIT_EXPORT_MODE = "PERFKIT_EXPORT_MODE"
"""``process`` (default: spans built in the export agent) or ``thread`` (in the app process)."""
PERFKIT_JSONL_PATH = "PERFKIT_JSONL_PATH"
"""With exporter ``jsonl``: the file of spans, one OTLP/JSON request per line."""
PERFKIT_PROMETHEUS_DIR = "PERFKIT_PROMETHEUS_DIR"
"""Where every worker's pipeline writes its metrics, and the Prometheus server reads them (_export/_prometheus.py)."""
PERFKIT_PROMETHEUS_PORT = "PERFKIT_PROMETHEUS_PORT"
"""``perfkit run --prometheus-port``: the process perfkit run became serves ``/metrics`` here."""
PERFKIT_PROMETHEUS_HOST = "PERFKIT_PROMETHEUS_HOST"
"""``perfkit run --prometheus-host``: the address ``/metrics`` listens on; default 127.0.0.1."""

# -- perfkit: profiling (set by perfkit run, read in each worker) ------------------
PERFKIT_PROFILE_SECRET = "PERFKIT_PROFILE_SECRET"
"""Requests with ``x-perfkit-profile: <this>`` are profiled; only ever from the environment."""
PERFKIT_PROFILE_DIR = "PERFKIT_PROFILE_DIR"
"""Where per-request profiles are written; default ``perfkit-profiles``."""
PERFKIT_PROFILE_MAX = "PERFKIT_PROFILE_MAX"
"""At most this many per-request profiles per process; default 50."""
PERFKIT_STAGE_PROFILE_DIR = "PERFKIT_STAGE_PROFILE_DIR"
"""Set: each worker samples its stacks by stage, and writes the profile here when it stops."""
PERFKIT_STAGE_PROFILE_INTERVAL_MS = "PERFKIT_STAGE_PROFILE_INTERVAL_MS"
"""The per-stage profiler's sampling interval in milliseconds; default 5."""
PERFKIT_PYROSCOPE_URL = "PERFKIT_PYROSCOPE_URL"
"""Set: each worker sends continuous profiles, tagged with perfkit's stages, to this pyroscope server."""
PERFKIT_PYROSCOPE_SAMPLE_RATE = "PERFKIT_PYROSCOPE_SAMPLE_RATE"
"""Pyroscope's samples a second; default 100."""

# -- perfkit: the bench ------------------------------------------------------------
PERFKIT_CACHE_DIR = "PERFKIT_CACHE_DIR"
"""Where the per-version LiteLLM venvs are built; default ``~/.cache/litellm_perfkit`` (_bench/_venvs.py)."""

# -- perfkit: the Locust user's options (each one's --perfkit-* flag) -------------
PERFKIT_MODEL = "PERFKIT_MODEL"
"""``--perfkit-model``: the model requested; default ``fake-openai-endpoint``."""
PERFKIT_STREAM = "PERFKIT_STREAM"
"""``--perfkit-stream``: ``on`` (default) or ``off``."""
PERFKIT_PROMPT_REPEATS = "PERFKIT_PROMPT_REPEATS"
"""``--perfkit-prompt-repeats``: the load-test sentence this many times in the prompt; default 150."""
PERFKIT_MAX_TOKENS = "PERFKIT_MAX_TOKENS"
"""``--perfkit-max-tokens``: ``max_tokens`` sent; default 0, not sent."""
PERFKIT_PATH = "PERFKIT_PATH"
"""``--perfkit-path``: the endpoint's path; default ``/v1/chat/completions``."""
PERFKIT_API_KEY = "PERFKIT_API_KEY"
"""The bearer key: Locust's ``--perfkit-api-key`` (default ``$API_KEY``, else ``sk-1234``), and
``perfkit load``'s and ``perfkit bench``'s when no ``--api-key-file`` is given (empty: none sent)."""
PERFKIT_ENTRIES = "PERFKIT_ENTRIES"
"""``--perfkit-entries``: extra Locust entries beside each request (ttft, chunk_gap, overhead, stage); default none."""
PERFKIT_WARMUP = "PERFKIT_WARMUP"
"""``--perfkit-warmup``: seconds after the test starts that perfkit's histograms ignore; default 0."""
PERFKIT_RESULT = "PERFKIT_RESULT"
"""``--perfkit-result``: where the merged ``perfkit.load/1`` document is written when the test stops."""
PERFKIT_JSONL_DIR = "PERFKIT_JSONL_DIR"
"""``--perfkit-jsonl-dir``: each process writes one JSON line per request to ``DIR/locust-PID.jsonl``."""
API_KEY = "API_KEY"
"""The Locust user's key when ``--perfkit-api-key`` is not given (LiteLLM's load tests' name for it)."""

# -- perfkit: set for its own processes, never by hand ----------------------------
PERFKIT_RUN = "PERFKIT_RUN"
"""``1`` in every process ``perfkit run`` starts: the bootstrap instruments a LiteLLM proxy there."""
PERFKIT_RUN_PID = "PERFKIT_RUN_PID"
"""The pid of the process ``perfkit run`` became (its exec keeps the pid): the proxy's first process."""
PERFKIT_ROLE = "PERFKIT_ROLE"
"""``agent`` in the export agent's process: the bootstrap leaves it uninstrumented."""
PERFKIT_APP_PID = "PERFKIT_APP_PID"
"""In the export agent: the pid of the app process it exports for."""
PERFKIT_AGENT_SETTINGS = "PERFKIT_AGENT_SETTINGS"
"""In the export agent: its export settings, as JSON."""

# -- OpenTelemetry's standard variables (perfkit's exporter) -----------------------
OTEL_SDK_DISABLED = "OTEL_SDK_DISABLED"
"""``true``: perfkit exports nothing (traces and metrics); the middleware still records."""
OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
"""The resource's ``service.name``; default ``litellm-proxy``."""
OTEL_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"
"""``k=v,...`` added to the resource (URL-encoded values)."""
OTEL_PROPAGATORS = "OTEL_PROPAGATORS"
"""Read by the host's OpenTelemetry, whose propagators perfkit uses (_core/_hosttrace.py)."""
OTEL_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
"""``otlp`` (default), ``console``, ``jsonl``, ``sdk`` or ``none``."""
OTEL_METRICS_EXPORTER = "OTEL_METRICS_EXPORTER"
"""``otlp`` (default) or ``none``."""
OTEL_TRACES_SAMPLER = "OTEL_TRACES_SAMPLER"
"""The sampler's name; default ``parentbased_always_on``."""
OTEL_TRACES_SAMPLER_ARG = "OTEL_TRACES_SAMPLER_ARG"
"""The ratio of the ``traceidratio`` samplers, 0 to 1; default 1."""
OTEL_BSP_SCHEDULE_DELAY = "OTEL_BSP_SCHEDULE_DELAY"
"""Milliseconds between export batches; default 5000."""
OTEL_BSP_MAX_QUEUE_SIZE = "OTEL_BSP_MAX_QUEUE_SIZE"
"""Requests waiting for export; default 2048."""
OTEL_BSP_MAX_EXPORT_BATCH_SIZE = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
"""Spans per export call; default 512."""
OTEL_METRIC_EXPORT_INTERVAL = "OTEL_METRIC_EXPORT_INTERVAL"
"""Milliseconds between metric exports; default 60000."""
OTEL_EXPORTER_OTLP_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
"""``http/protobuf`` (default), ``http/json`` or ``grpc``."""
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
"""The same, for traces, over the general one."""
OTEL_EXPORTER_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""The base URL; default ``http://localhost:4318`` (``:4317`` for grpc)."""
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
"""For traces only: its URL, used as is."""
OTEL_EXPORTER_OTLP_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
"""For metrics only: its URL, used as is."""
OTEL_EXPORTER_OTLP_HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
"""``k=v,...`` sent with every export."""
OTEL_EXPORTER_OTLP_TRACES_HEADERS = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
"""For traces only, over ``OTEL_EXPORTER_OTLP_HEADERS``."""
OTEL_EXPORTER_OTLP_METRICS_HEADERS = "OTEL_EXPORTER_OTLP_METRICS_HEADERS"
"""For metrics only, over ``OTEL_EXPORTER_OTLP_HEADERS``."""
OTEL_EXPORTER_OTLP_TIMEOUT = "OTEL_EXPORTER_OTLP_TIMEOUT"
"""Milliseconds per export; default 10000."""
OTEL_EXPORTER_OTLP_TRACES_TIMEOUT = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
"""For traces only, over ``OTEL_EXPORTER_OTLP_TIMEOUT``."""
OTEL_EXPORTER_OTLP_METRICS_TIMEOUT = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"
"""For metrics only, over ``OTEL_EXPORTER_OTLP_TIMEOUT``."""
OTEL_EXPORTER_OTLP_COMPRESSION = "OTEL_EXPORTER_OTLP_COMPRESSION"
"""``gzip`` or ``none`` (default)."""
OTEL_EXPORTER_OTLP_TRACES_COMPRESSION = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
"""For traces only, over ``OTEL_EXPORTER_OTLP_COMPRESSION``."""
OTEL_EXPORTER_OTLP_METRICS_COMPRESSION = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION"
"""For metrics only, over ``OTEL_EXPORTER_OTLP_COMPRESSION``."""
OTEL_EXPORTER_OTLP_CERTIFICATE = "OTEL_EXPORTER_OTLP_CERTIFICATE"
"""A PEM file of CA certificates to verify the backend with."""
OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"
"""For traces only, over ``OTEL_EXPORTER_OTLP_CERTIFICATE``."""
OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE = "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE"
"""For metrics only, over ``OTEL_EXPORTER_OTLP_CERTIFICATE``."""
OTEL_EXPORTER_OTLP_CLIENT_KEY = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
"""With the client certificate: mutual TLS."""
OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"
"""For traces only, over ``OTEL_EXPORTER_OTLP_CLIENT_KEY``."""
OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY = "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY"
"""For metrics only, over ``OTEL_EXPORTER_OTLP_CLIENT_KEY``."""
OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
"""With the client key: mutual TLS."""
OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"
"""For traces only, over ``OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE``."""
OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE = "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE"
"""For metrics only, over ``OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE``."""

# -- perfkit's own copies of the OTEL_* variables -------------------------------
PERFKIT_OTEL_PREFIX = "PERFKIT_OTEL_"
"""Any ``OTEL_*`` variable above, prefixed with ``PERFKIT_``, is read by perfkit alone, over
the standard one: for a host whose own SDK reads that variable differently (_export/_settings.py)."""


def standard_variable(name: str) -> str | None:
    """The standard name of a ``PERFKIT_OTEL_*`` variable (``OTEL_SERVICE_NAME`` for
    ``PERFKIT_OTEL_SERVICE_NAME``); None for any other name."""
    return name.removeprefix("PERFKIT_") if name.startswith(PERFKIT_OTEL_PREFIX) else None


# The ones perfkit run's export flags set.
PERFKIT_OTEL_SERVICE_NAME = "PERFKIT_OTEL_SERVICE_NAME"
"""``OTEL_SERVICE_NAME`` for perfkit alone: ``perfkit run --service-name``."""
PERFKIT_OTEL_TRACES_EXPORTER = "PERFKIT_OTEL_TRACES_EXPORTER"
"""``OTEL_TRACES_EXPORTER`` for perfkit alone: ``perfkit run --exporter``."""
PERFKIT_OTEL_EXPORTER_OTLP_ENDPOINT = "PERFKIT_OTEL_EXPORTER_OTLP_ENDPOINT"
"""``OTEL_EXPORTER_OTLP_ENDPOINT`` for perfkit alone: ``perfkit run --endpoint``."""
PERFKIT_OTEL_EXPORTER_OTLP_PROTOCOL = "PERFKIT_OTEL_EXPORTER_OTLP_PROTOCOL"
"""``OTEL_EXPORTER_OTLP_PROTOCOL`` for perfkit alone: ``perfkit run --protocol``."""
PERFKIT_OTEL_TRACES_SAMPLER = "PERFKIT_OTEL_TRACES_SAMPLER"
"""``OTEL_TRACES_SAMPLER`` for perfkit alone: ``perfkit run --sampler``."""
PERFKIT_OTEL_TRACES_SAMPLER_ARG = "PERFKIT_OTEL_TRACES_SAMPLER_ARG"
"""``OTEL_TRACES_SAMPLER_ARG`` for perfkit alone: ``perfkit run --sampler-arg``."""

# -- LiteLLM's own ---------------------------------------------------------------
OTEL_EXPORTER = "OTEL_EXPORTER"
"""LiteLLM's: ``otlp_http`` or ``otlp_grpc``, read where ``OTEL_EXPORTER_OTLP_PROTOCOL`` is not set."""
OTEL_ENDPOINT = "OTEL_ENDPOINT"
"""LiteLLM's: its traces URL, read where the standard endpoints are not set."""
OTEL_HEADERS = "OTEL_HEADERS"
"""LiteLLM's: read where ``OTEL_EXPORTER_OTLP_HEADERS`` is not set."""
LITELLM_LOCAL_MODEL_COST_MAP = "LITELLM_LOCAL_MODEL_COST_MAP"
"""Set for the proxy the bench starts: the cost map shipped in the package, not fetched."""
LITELLM_TELEMETRY = "LITELLM_TELEMETRY"
"""Set to ``False`` for the proxy the bench starts."""
DISABLE_SCHEMA_UPDATE = "DISABLE_SCHEMA_UPDATE"
"""Set for the proxy the bench starts: no database schema update at start-up."""
