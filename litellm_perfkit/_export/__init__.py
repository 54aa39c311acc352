"""Export: finished timelines to OTLP (HTTP/JSON, HTTP/protobuf, gRPC), console or JSONL."""

from __future__ import annotations

import os
import threading

from .._core._guard import logger
from .._wire._environment_variables import OTEL_TRACES_EXPORTER, PERFKIT_EXPORT_MODE, PERFKIT_OTEL_TRACES_EXPORTER
from ..types import ExporterName, ExportMode, OtlpProtocol, SamplerName
from ._pipeline import Pipeline
from ._prometheus import serve_prometheus
from ._settings import ExportSettings, read_settings

__all__ = [
    "configure",
    "shutdown",
    "serve_prometheus",
    "active_pipeline",
    "Pipeline",
    "ExportSettings",
    "read_settings",
]

_lock = threading.Lock()
_pipeline: Pipeline | None = None


def configure(
    *,
    service_name: str | None = None,
    exporter: ExporterName | None = None,
    protocol: OtlpProtocol | None = None,
    endpoint: str | None = None,
    sampler: SamplerName | None = None,
    jsonl_path: str | None = None,
    mode: ExportMode | None = None,
) -> Pipeline:
    """Start exporting every finished request timeline.

    Arguments left out come from the standard ``OTEL_*`` variables
    (``OTEL_SERVICE_NAME``, ``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, ``OTEL_EXPORTER_OTLP_HEADERS``,
    ``OTEL_TRACES_SAMPLER``...; see docs/configuration.md). Calling it again
    replaces the previous pipeline after flushing it.

    ``mode`` (or ``PERFKIT_EXPORT_MODE``): ``process`` (default) builds and
    exports spans in a child process; ``thread`` does it in a thread here.

    When the host has set an OpenTelemetry SDK tracer provider and no
    exporter is chosen, spans go to it (exporter ``sdk``, in thread mode):
    every span processor and exporter the host configured gets them.
    """
    global _pipeline
    if (
        exporter is None
        and not os.environ.get(OTEL_TRACES_EXPORTER)
        and not os.environ.get(PERFKIT_OTEL_TRACES_EXPORTER)
    ):
        from ._sdk import host_provider

        if host_provider() is not None:
            exporter = "sdk"
    settings = read_settings(
        service_name=service_name,
        exporter=exporter,
        protocol=protocol,
        endpoint=endpoint,
        sampler=sampler,
        jsonl_path=jsonl_path,
    )
    with _lock:
        if _pipeline is not None:
            _pipeline.shutdown()
        # The host's SDK lives in this process, and the console is its stdout
        # (the agent's is the pipe it reports on): their spans are built here.
        chosen = "thread" if settings.exporter in ("sdk", "console") else mode or _mode_from_env()
        _pipeline = Pipeline(settings, mode=chosen).start()
        return _pipeline


def shutdown() -> None:
    """Flush everything queued (spans and metrics) and stop exporting."""
    global _pipeline
    with _lock:
        if _pipeline is not None:
            _pipeline.shutdown()
            _pipeline = None


def active_pipeline() -> Pipeline | None:
    return _pipeline


def _mode_from_env() -> ExportMode:
    raw = os.environ.get(PERFKIT_EXPORT_MODE, "process").strip().lower()
    if raw in ("process", "thread"):
        return raw  # type: ignore[return-value]
    logger.warning("perfkit: PERFKIT_EXPORT_MODE=%r is not valid (expected process or thread); using 'process'", raw)
    return "process"
