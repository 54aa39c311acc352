"""The export pipeline: a bounded queue on the request side, a thread on the other.

The request side does one ``len`` and one ``deque.append`` (both atomic under
the GIL, no lock, no wake-up). The thread wakes on a timer, freezes timelines
into records, feeds the histograms, builds spans for sampled requests and
exports them in batches. A full queue or a failed export drops and counts.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from .._core._guard import internal_error, logger
from .._core._sink import set_sink
from .._core._timeline import Timeline
from ..types import RequestRecord
from ._metrics import MetricStore
from ._settings import ExportSettings
from ._spans import Sampler, SpanData, record_to_spans
from ._transport import Exporter, make_exporter

__all__ = ["Pipeline"]

# Records handled between voluntary GIL releases, so the export thread never
# holds the interpreter for long while requests wait.
_SLICE = 16

RecordListener = Callable[[RequestRecord, str], None]


class Pipeline:
    def __init__(
        self,
        settings: ExportSettings,
        exporter: Exporter | None = None,
        upstream_stages: frozenset[str] = frozenset({"upstream"}),
    ) -> None:
        self.settings = settings
        self._exporter = exporter if exporter is not None else make_exporter(settings)
        self._sampler = Sampler(settings.sampler, settings.sampler_ratio)
        self._queue: deque[Timeline] = deque()
        self._max_queue = settings.max_queue
        self._upstream_stages = upstream_stages
        self.metrics = MetricStore()
        self.listeners: list[RecordListener] = []
        self._pending: list[SpanData] = []
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # one drain at a time (thread vs. flush)
        self._start_unix_ns = time.time_ns()
        self._last_metrics = time.monotonic()
        self._pid = os.getpid()
        self._thread: threading.Thread | None = None
        self.exported_spans = 0

    # -- request side -------------------------------------------------------
    def submit(self, timeline: Timeline) -> None:
        if len(self._queue) >= self._max_queue:
            self.metrics.counters["perfkit.requests.dropped"] += 1
            return
        self._queue.append(timeline)

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> Pipeline:
        self._thread = threading.Thread(target=self._run, name="perfkit-export", daemon=True)
        self._thread.start()
        set_sink(self.submit)
        atexit.register(self.shutdown)
        return self

    def force_flush(self) -> None:
        self._drain(export_metrics=True)

    def shutdown(self) -> None:
        if self._stopped.is_set():
            return
        set_sink(None)
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive() and os.getpid() == self._pid:
            self._thread.join(timeout=self.settings.timeout_s + 5)
        self._drain(export_metrics=True)
        if self._exporter is not None:
            self._exporter.close()
        dropped = self.metrics.counters["perfkit.spans.dropped"]
        lost = self.metrics.counters["perfkit.requests.dropped"]
        if dropped or lost:
            logger.warning(
                "perfkit: %d spans could not be exported and %d requests were dropped from a full queue",
                dropped,
                lost,
            )

    # -- export thread ------------------------------------------------------
    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.settings.schedule_delay_s)
            due = time.monotonic() - self._last_metrics >= self.settings.metric_interval_s
            try:
                self._drain(export_metrics=due)
            except Exception as exc:
                internal_error("export.thread", exc)

    def _drain(self, export_metrics: bool) -> None:
        with self._lock:
            queue = self._queue
            anchor = time.time_ns() - time.perf_counter_ns()
            handled = 0
            while queue:
                timeline = queue.popleft()
                try:
                    self._handle(timeline.freeze(self._upstream_stages), anchor)
                except Exception as exc:
                    internal_error("export.record", exc)
                handled += 1
                if handled % _SLICE == 0:
                    time.sleep(0)
                if len(self._pending) >= self.settings.max_batch:
                    self._flush_spans()
            self._flush_spans()
            if export_metrics:
                self._last_metrics = time.monotonic()
                if self._exporter is not None and self.settings.metrics:
                    self._exporter.export_metrics(self.metrics, self._start_unix_ns, time.time_ns())

    def _handle(self, record: RequestRecord, anchor: int) -> None:
        self.metrics.observe(record)
        trace_id, spans = record_to_spans(record, self._sampler, anchor)
        for listener in self.listeners:
            listener(record, trace_id)
        if self._exporter is not None:
            self._pending.extend(spans)

    def _flush_spans(self) -> None:
        if not self._pending or self._exporter is None:
            self._pending.clear()
            return
        batch, self._pending = self._pending, []
        if self._exporter.export_spans(batch):
            self.exported_spans += len(batch)
        else:
            self.metrics.counters["perfkit.spans.dropped"] += len(batch)
