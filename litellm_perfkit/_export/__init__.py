"""Export: finished timelines to OTLP (HTTP/JSON, HTTP/protobuf, gRPC), console or JSONL."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..types import ExporterName, OtlpProtocol, SamplerName
from ._pipeline import Pipeline
from ._settings import ExportSettings, read_settings

__all__ = ["configure", "shutdown", "active_pipeline", "Pipeline", "ExportSettings", "read_settings"]

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
    upstream_stages: Iterable[str] = ("upstream",),
) -> Pipeline:
    """Start exporting every finished request timeline.

    Arguments left out come from the standard ``OTEL_*`` variables
    (``OTEL_SERVICE_NAME``, ``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, ``OTEL_EXPORTER_OTLP_HEADERS``,
    ``OTEL_TRACES_SAMPLER``...; see docs/configuration.md). Calling it again
    replaces the previous pipeline after flushing it.
    """
    global _pipeline
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
        _pipeline = Pipeline(settings, upstream_stages=frozenset(upstream_stages)).start()
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
