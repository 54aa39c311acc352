"""Export settings from keyword arguments, then standard ``OTEL_*`` variables.

A bad value never stops the host: it gets one warning naming the variable,
what was wrong and what is used instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, get_args
from urllib.parse import unquote, urlsplit

from .._core._guard import logger
from .._wire import _environment_variables as variables
from .._wire._names import SemConv
from ..types import ExporterName, OtlpProtocol, SamplerName

__all__ = ["DEFAULT_SERVICE_NAME", "ExportSettings", "SCHEDULE_DELAY_S", "read_settings"]

DEFAULT_SERVICE_NAME = "litellm-proxy"

SCHEDULE_DELAY_S = 5.0
"""``OTEL_BSP_SCHEDULE_DELAY``'s default, the spec's: each drain costs the
export agent about 1 ms of CPU whatever it carries, so at the default record
rate the schedule, not the records, set the agent's cost (docs/overhead.md)."""

_DEFAULT_ENDPOINTS: dict[str, str] = {
    "grpc": "http://localhost:4317",
    "http/protobuf": "http://localhost:4318",
    "http/json": "http://localhost:4318",
}


@dataclass(frozen=True)
class ExportSettings:
    service_name: str = DEFAULT_SERVICE_NAME
    exporter: ExporterName = "otlp"
    protocol: OtlpProtocol = "http/protobuf"
    endpoint: str = "http://localhost:4318"
    traces_endpoint: str = "http://localhost:4318/v1/traces"
    metrics_endpoint: str = "http://localhost:4318/v1/metrics"
    # Per signal: OTEL_EXPORTER_OTLP_TRACES_* or _METRICS_* over OTEL_EXPORTER_OTLP_*.
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    compression: str = "none"
    certificate: str | None = None  # a CA bundle (PEM) to verify the backend with; None: the system's
    client_key: str | None = None  # with client_certificate: mutual TLS
    client_certificate: str | None = None
    metrics_headers: dict[str, str] = field(default_factory=dict)
    metrics_timeout_s: float = 10.0
    metrics_compression: str = "none"
    metrics_certificate: str | None = None
    metrics_client_key: str | None = None
    metrics_client_certificate: str | None = None
    sampler: SamplerName = "parentbased_always_on"
    sampler_ratio: float = 1.0
    schedule_delay_s: float = SCHEDULE_DELAY_S
    max_queue: int = 2048
    max_batch: int = 512
    metric_interval_s: float = 60.0
    metrics: bool = True
    jsonl_path: str | None = None
    resource_attributes: dict[str, str] = field(default_factory=dict)
    prometheus_dir: str | None = None  # PERFKIT_PROMETHEUS_DIR: write snapshots there for the Prometheus server


def _warn(variable: str, value: str, why: str, fallback: object) -> None:
    logger.warning("perfkit: %s=%r is not valid (%s); using %r", variable, value, why, fallback)


def _choice(env: Mapping[str, str], variable: str, explicit: str | None, allowed: tuple[str, ...], default: str) -> str:
    raw = explicit if explicit is not None else env.get(variable)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in allowed:
        _warn(variable, raw, "expected one of " + ", ".join(allowed), default)
        return default
    return value


def _number(env: Mapping[str, str], variable: str, default: float, minimum: float, scale: float = 1.0) -> float:
    raw = env.get(variable)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw) * scale
    except ValueError:
        _warn(variable, raw, "expected a number", default)
        return default
    if value < minimum:
        _warn(variable, raw, f"must be at least {minimum / scale:g}", default)
        return default
    return value


def _key_values(env: Mapping[str, str], variable: str) -> dict[str, str]:
    """``k=v,k2=v2`` with URL-encoded values (OTLP headers, resource attributes)."""
    raw = env.get(variable, "")
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            _warn(variable, raw, f"{item!r} is not key=value", "the other pairs")
            continue
        pairs[key.strip()] = unquote(value.strip())
    return pairs


def _url(variable: str, raw: str, default: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        _warn(variable, raw, "expected http(s)://host:port", default)
        return default
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        _warn(variable, raw, "bad port", default)
        return default
    return raw.rstrip("/")


_LITELLM_PROTOCOLS = {
    "otlp_http": "http/protobuf",
    "otlp_grpc": "grpc",
    "http/protobuf": "http/protobuf",
    "http/json": "http/json",
    "grpc": "grpc",
}


def effective_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables perfkit reads, in order of precedence:

    1. ``PERFKIT_OTEL_*``: the same as ``OTEL_*``, for perfkit alone (when the
       host's SDK reads a variable differently);
    2. the standard ``OTEL_*``;
    3. LiteLLM's own ``OTEL_EXPORTER`` / ``OTEL_ENDPOINT`` / ``OTEL_HEADERS``,
       so an operator whose LiteLLM tracing works gets perfkit's spans there too.

    ``OTEL_SDK_DISABLED=true`` turns export off (traces and metrics)."""
    merged = dict(env)
    exporter = env.get(variables.OTEL_EXPORTER, "").strip().lower()
    if variables.OTEL_EXPORTER_OTLP_PROTOCOL not in env and exporter in _LITELLM_PROTOCOLS:
        merged[variables.OTEL_EXPORTER_OTLP_PROTOCOL] = _LITELLM_PROTOCOLS[exporter]
    endpoint = env.get(variables.OTEL_ENDPOINT, "").strip()
    if (
        endpoint
        and variables.OTEL_EXPORTER_OTLP_ENDPOINT not in env
        and variables.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT not in env
    ):
        if endpoint.rstrip("/").endswith("/v1/traces"):  # LiteLLM's is the traces URL itself
            merged[variables.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT] = endpoint
            merged[variables.OTEL_EXPORTER_OTLP_ENDPOINT] = endpoint.rstrip("/").removesuffix("/v1/traces")
        else:
            merged[variables.OTEL_EXPORTER_OTLP_ENDPOINT] = endpoint
    if variables.OTEL_EXPORTER_OTLP_HEADERS not in env and env.get(variables.OTEL_HEADERS):
        merged[variables.OTEL_EXPORTER_OTLP_HEADERS] = env[variables.OTEL_HEADERS]
    for name, value in env.items():
        standard = variables.standard_variable(name)
        if standard is not None:
            merged[standard] = value
    if merged.get(variables.OTEL_SDK_DISABLED, "").strip().lower() == "true":
        merged[variables.OTEL_TRACES_EXPORTER] = merged[variables.OTEL_METRICS_EXPORTER] = "none"
    return merged


class _SignalVariables(NamedTuple):
    """The OTLP exporter's variables that come in three: general, traces' own and metrics' own."""

    headers: str
    timeout: str
    compression: str
    certificate: str
    client_key: str
    client_certificate: str


_GENERAL = _SignalVariables(
    variables.OTEL_EXPORTER_OTLP_HEADERS,
    variables.OTEL_EXPORTER_OTLP_TIMEOUT,
    variables.OTEL_EXPORTER_OTLP_COMPRESSION,
    variables.OTEL_EXPORTER_OTLP_CERTIFICATE,
    variables.OTEL_EXPORTER_OTLP_CLIENT_KEY,
    variables.OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE,
)
# ExportSettings' field prefix -> that signal's own variables.
_SIGNALS = {
    "": _SignalVariables(
        variables.OTEL_EXPORTER_OTLP_TRACES_HEADERS,
        variables.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
        variables.OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
        variables.OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE,
        variables.OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY,
        variables.OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE,
    ),
    "metrics_": _SignalVariables(
        variables.OTEL_EXPORTER_OTLP_METRICS_HEADERS,
        variables.OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
        variables.OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
        variables.OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE,
        variables.OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY,
        variables.OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE,
    ),
}
_TLS_FILES = ("certificate", "client_key", "client_certificate")


def _signals(env: Mapping[str, str]) -> dict[str, Any]:
    """Each signal's headers, timeout, compression and TLS files: its own
    variable (``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``) over the general one
    (each variable read, and warned about, once)."""
    timeout = _number(env, _GENERAL.timeout, 10.0, 0.001, scale=0.001)
    compression = _choice(env, _GENERAL.compression, None, ("gzip", "none"), "none")
    files = {name: _file(env, getattr(_GENERAL, name)) for name in _TLS_FILES}
    values: dict[str, Any] = {}
    for prefix, own in _SIGNALS.items():
        values[prefix + "headers"] = {**_key_values(env, _GENERAL.headers), **_key_values(env, own.headers)}
        values[prefix + "timeout_s"] = _number(env, own.timeout, timeout, 0.001, scale=0.001)
        values[prefix + "compression"] = _choice(env, own.compression, None, ("gzip", "none"), compression)
        for name, path in files.items():
            values[prefix + name] = _file(env, getattr(own, name)) or path
    return values


def _file(env: Mapping[str, str], variable: str) -> str | None:
    path = env.get(variable, "").strip()
    if path and not os.path.isfile(path):
        _warn(variable, path, "no such file", None)
        return None
    return path or None


def _exporter(env: Mapping[str, str], exporter: str | None, jsonl_path: str | None) -> tuple[str, str | None]:
    """The traces exporter and the JSONL path; ``jsonl`` without a path is ``none``, with a warning."""
    exporter_value = _choice(env, variables.OTEL_TRACES_EXPORTER, exporter, get_args(ExporterName), "otlp")
    if jsonl_path is None:
        jsonl_path = env.get(variables.PERFKIT_JSONL_PATH) or None
    if exporter_value == "jsonl" and not jsonl_path:
        _warn(variables.OTEL_TRACES_EXPORTER, "jsonl", "jsonl needs a path (PERFKIT_JSONL_PATH)", "none")
        exporter_value = "none"
    return exporter_value, jsonl_path


def _endpoints(env: Mapping[str, str], protocol: str | None, endpoint: str | None) -> tuple[str, str, str, str]:
    """The OTLP protocol, the base endpoint, and the traces and metrics endpoints
    (each signal's own variable over the base, unless ``endpoint`` is given)."""
    proto = _choice(env, variables.OTEL_EXPORTER_OTLP_PROTOCOL, protocol, get_args(OtlpProtocol), "http/protobuf")
    proto = _choice(env, variables.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, None, get_args(OtlpProtocol), proto)
    default_endpoint = _DEFAULT_ENDPOINTS[proto]
    base_raw = endpoint or env.get(variables.OTEL_EXPORTER_OTLP_ENDPOINT) or default_endpoint
    base = _url(variables.OTEL_EXPORTER_OTLP_ENDPOINT, base_raw, default_endpoint)
    # gRPC has one endpoint for every service; HTTP a path per signal.
    traces, metrics = (base, base) if proto == "grpc" else (base + "/v1/traces", base + "/v1/metrics")
    if not endpoint and env.get(variables.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT):
        traces = _url(
            variables.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, env[variables.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT], traces
        )
    if not endpoint and env.get(variables.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT):
        metrics = _url(
            variables.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
            env[variables.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT],
            metrics,
        )
    return proto, base, traces, metrics


def _sampler(env: Mapping[str, str], sampler: str | None) -> tuple[str, float]:
    """The sampler's name and its ratio (1 unless a ``traceidratio`` sampler is given one)."""
    sampler_value = _choice(env, variables.OTEL_TRACES_SAMPLER, sampler, get_args(SamplerName), "parentbased_always_on")
    ratio = 1.0
    if sampler_value.endswith("traceidratio"):
        ratio = _number(env, variables.OTEL_TRACES_SAMPLER_ARG, 1.0, 0.0)
        if ratio > 1.0:
            _warn(
                variables.OTEL_TRACES_SAMPLER_ARG, env[variables.OTEL_TRACES_SAMPLER_ARG], "a ratio is at most 1", 1.0
            )
            ratio = 1.0
    return sampler_value, ratio


def read_settings(
    env: Mapping[str, str] | None = None,
    *,
    service_name: str | None = None,
    exporter: str | None = None,
    protocol: str | None = None,
    endpoint: str | None = None,
    sampler: str | None = None,
    jsonl_path: str | None = None,
) -> ExportSettings:
    env = effective_env(os.environ if env is None else env)
    resource = _key_values(env, variables.OTEL_RESOURCE_ATTRIBUTES)
    name = (
        service_name
        or env.get(variables.OTEL_SERVICE_NAME)
        or resource.get(SemConv.SERVICE_NAME)
        or DEFAULT_SERVICE_NAME
    )
    exporter_value, jsonl_path = _exporter(env, exporter, jsonl_path)
    proto, base, traces, metrics = _endpoints(env, protocol, endpoint)
    sampler_value, ratio = _sampler(env, sampler)
    metrics_exporter = _choice(env, variables.OTEL_METRICS_EXPORTER, None, ("otlp", "none"), "otlp")
    return ExportSettings(
        service_name=name,
        exporter=exporter_value,  # type: ignore[arg-type]  # validated by _choice
        protocol=proto,  # type: ignore[arg-type]
        endpoint=base,
        traces_endpoint=traces,
        metrics_endpoint=metrics,
        **_signals(env),
        sampler=sampler_value,  # type: ignore[arg-type]
        sampler_ratio=ratio,
        schedule_delay_s=_number(env, variables.OTEL_BSP_SCHEDULE_DELAY, SCHEDULE_DELAY_S, 0.001, scale=0.001),
        max_queue=int(_number(env, variables.OTEL_BSP_MAX_QUEUE_SIZE, 2048, 1)),
        max_batch=int(_number(env, variables.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512, 1)),
        metric_interval_s=_number(env, variables.OTEL_METRIC_EXPORT_INTERVAL, 60.0, 0.001, scale=0.001),
        metrics=metrics_exporter != "none" and exporter_value == "otlp",
        jsonl_path=jsonl_path,
        resource_attributes=resource,
        prometheus_dir=env.get(variables.PERFKIT_PROMETHEUS_DIR) or None,
    )
