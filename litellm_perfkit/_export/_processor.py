"""Request records in; metrics, spans and exports out (thread mode and the export agent)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from .._core._guard import internal_error, internal_error_counts, logger
from .._wire._names import Metric
from ..types import RequestRecord
from ._metrics import MetricStore
from ._otlp import encode_stage_spans
from ._prometheus import SnapshotWriter
from ._settings import ExportSettings
from ._spans import Sampler, Span, record_to_spans, request_spans, trace_context
from ._transport import Exporter, ProtobufExporter, make_exporter

__all__ = ["Processor", "RecordListener"]

RecordListener = Callable[[RequestRecord, str], None]
"""Called with each finished request and its trace id (thread mode)."""


class Processor:
    """Request records in; metrics, spans and exports out. Used by thread mode and the agent."""

    def __init__(self, settings: ExportSettings, exporter: Exporter | None = None) -> None:
        self.settings = settings
        self._exporter = exporter if exporter is not None else make_exporter(settings)
        self.exporter = self._exporter
        self._sampler = Sampler(settings.sampler, settings.sampler_ratio)
        self.metrics = MetricStore()
        self.listeners: list[RecordListener] = []
        # An exporter that posts protobuf is handed each request's stage spans
        # already encoded, with no Python object built per span.
        self._protobuf_exporter = (
            cast(ProtobufExporter, self._exporter)
            if self._exporter is not None and self._exporter.span_form == "protobuf"
            else None
        )
        self._pending: list[Span | bytes] = []  # bytes only for an exporter that posts protobuf
        self._pending_spans = 0
        self._start_unix_ns = time.time_ns()
        self._last_metrics = time.monotonic()
        self.exported_spans = 0
        self.recorded = 0  # records handled
        self.gave_up = False  # set at a shutdown that cannot wait: spans are dropped and counted, not exported
        self._prometheus = SnapshotWriter(settings.prometheus_dir) if settings.prometheus_dir else None

    def changed(self) -> None:
        """The metrics changed: the next Prometheus snapshot that is due writes them."""
        if self._prometheus is not None:
            self._prometheus.changed()

    def handle(self, record: RequestRecord, anchor_ns: int) -> None:
        self.recorded += 1
        self.changed()
        try:
            durations = [stage.duration_ns for stage in record.stages]  # the metrics' and the spans'
            self.metrics.observe(record, durations)
            trace_id, parent_span_id, flags = trace_context(record)
            for listener in self.listeners:
                listener(record, trace_id)
            if self._exporter is not None and self._sampler.should_sample(trace_id, flags):
                if self._protobuf_exporter is not None:
                    server, stages = request_spans(record, trace_id, parent_span_id, anchor_ns, durations)
                    self._pending += (server, encode_stage_spans(stages))
                    self._pending_spans += 1 + len(stages.stages)
                else:
                    spans = record_to_spans(record, trace_id, parent_span_id, anchor_ns, durations)
                    self._pending += spans
                    self._pending_spans += len(spans)
        except Exception as exc:
            internal_error("export.record", exc)
        if self._pending_spans >= self.settings.max_batch:
            self.flush_spans()

    def flush_spans(self) -> None:
        batch, count = self._pending, self._pending_spans
        self._pending, self._pending_spans = [], 0
        if not batch or self._exporter is None:
            return
        if self.gave_up:
            exported = False
        elif self._protobuf_exporter is not None:
            exported = self._protobuf_exporter.export_spans(batch)
        else:  # spans only: bytes are made for an exporter that posts protobuf
            exported = self._exporter.export_spans(cast("list[Span]", batch))
        if exported:
            self.exported_spans += count
        else:
            self.metrics.counters[Metric.SPANS_DROPPED] += count

    def export_metrics(self, force: bool = False) -> None:
        if self._prometheus is not None:
            try:
                self._prometheus.write(self.metrics, force)
            except OSError as exc:
                internal_error("export.prometheus", exc)
        now = time.monotonic()
        if not force and now - self._last_metrics < self.settings.metric_interval_s:
            return
        self._last_metrics = now
        if self._exporter is not None and self.settings.metrics and not self.gave_up:
            self._exporter.export_metrics(self.metrics, self._start_unix_ns, time.time_ns())

    def metrics_due_in(self) -> float | None:
        """Seconds until ``export_metrics`` has a held-back Prometheus snapshot to write, or None."""
        return None if self._prometheus is None else self._prometheus.due_in()

    def stats(self) -> dict[str, int]:
        return {
            "exported_spans": self.exported_spans,
            "dropped_spans": self.metrics.counters[Metric.SPANS_DROPPED],
            "dropped_requests": self.metrics.counters[Metric.REQUESTS_DROPPED],
            "recorded": self.recorded,
            "internal_errors": sum(internal_error_counts().values()),  # of the process it runs in
        }

    def close(self) -> None:
        self.flush_spans()
        self.export_metrics(force=True)
        if self._exporter is not None:
            self._exporter.close()
        stats = self.stats()
        if stats["dropped_spans"] or stats["dropped_requests"]:
            logger.warning(
                "perfkit: %d spans could not be exported and %d requests were dropped from a full queue",
                stats["dropped_spans"],
                stats["dropped_requests"],
            )
