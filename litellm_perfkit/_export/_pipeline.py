"""The export pipeline: a bounded queue on the request side, the work elsewhere.

The request side does one ``len`` and one ``deque.append`` (atomic under the
GIL: no lock, no wake-up), plus, in process mode, one ``Timeline.encode``. A
thread wakes on a timer and drains the queue.

- ``process`` mode (default): the request side encodes each timeline to bytes
  and queues those, so no live timeline waits for the garbage collector to
  walk it. With the C accelerator the queue is its ``Handoff``: two buffers
  allocated once, so a drain gives no memory back to the kernel to be faulted
  in again (docs/overhead.md). The thread writes batches to the export agent,
  a child process that builds spans and metrics and exports them. The
  agent's CPU is measured and published separately.
- ``thread`` mode: the thread does the span and metric work itself, under the
  GIL, for hosts that must not start processes.

A full queue or a failed export drops and counts; nothing ever blocks a request.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from .._core._backend import ACTIVE, Backend
from .._core._guard import internal_error, internal_error_counts, logger, warn_once
from .._core._sink import set_sink
from .._core._timeline import Timeline
from .._wire._environment_variables import PERFKIT_RUN_PID
from ..types import ExportMode
from ._agent_process import AgentProcess
from ._frames import batch_frame
from ._health import print_health_once, write_health
from ._processor import Processor
from ._settings import ExportSettings
from ._traffic import Traffic, keep, traffic_frame
from ._transport import Exporter

__all__ = ["Pipeline"]

# Records handled between voluntary GIL releases, so the export thread never
# holds the interpreter for long while requests wait.
_SLICE = 32
_RECORD_BYTES = 2048  # the hand-off holds max_queue records of this size on average
_RESTART_S = 1.0  # an agent that keeps dying costs at most one start a second

FlushPoint = Literal["handed_off", "exported"]


def _start_in_child(pipeline: weakref.ref[Pipeline]) -> None:
    alive = pipeline()
    if alive is not None:
        try:
            alive.restart_in_child()
        except Exception as exc:  # the fork's caller must never see it
            internal_error("export.fork", exc)


class Pipeline:
    def __init__(
        self,
        settings: ExportSettings,
        exporter: Exporter | None = None,
        mode: ExportMode = "thread",
        backend: Backend = ACTIVE,
    ) -> None:
        self.settings = settings
        self.mode: ExportMode = mode
        # Timelines (thread mode) or their encoded bytes (process mode).
        self._queue: deque[Any] = deque()
        self._max_queue = settings.max_queue
        # The request side wakes the export thread only when the queue is 3/4
        # full (a burst that would overflow before the next tick), not at
        # every full batch as OTel's BatchSpanProcessor does: on a 2-core
        # machine, waking a thread on the other core that often slowed the
        # serving thread by a third (docs/overhead.md, "Time").
        self._wake_at = max(1, 3 * settings.max_queue // 4) - 1
        self._dropped = 0  # by the Python queue; the C hand-off counts its own
        self._handoff: Any = None
        self._handoff_type = backend.handoff  # the C hand-off, when that backend runs
        self._processor = Processor(settings, exporter) if mode == "thread" else None
        self._agent: AgentProcess | None = None
        self._agent_failed = False  # it could not start: the queue fills, and what comes after is dropped and counted
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # one drain at a time (thread vs. flush)
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._tally = backend.tally  # every request this process served
        self._tally_sent = 0  # its request count when last handed to the metrics
        self._handed = 0  # records written to an agent (process mode)
        self._handed_to_agent = 0  # of them, to the current one
        self._agent_started_at = float("-inf")
        self._lost = 0  # handed to agents that died before saying they handled them
        self._dead_stats: dict[str, int] = {}  # what those agents had said

    @property
    def sink(self) -> Callable[[Timeline], None]:
        """What the core's sink is set to: the hand-off's own C method, or the queue's (no extra call)."""
        return self._handoff.submit if self._handoff is not None else self._enqueue

    @property
    def dropped_requests(self) -> int:
        """Requests dropped on the way to export: a full queue, or a failed write to the agent."""
        return self._dropped + (self._handoff.dropped if self._handoff is not None else 0)

    @property
    def lost_requests(self) -> int:
        """Records handed to an agent that it never said it handled: it was
        killed, or stopped at shutdown before it was done. Counted as dropped
        (some of them may have been exported before it died)."""
        if self._processor is not None:
            return 0
        current = 0 if self._agent is None else self._handed_to_agent - self._agent.last_stats.get("recorded", 0)
        return self._lost + max(0, current)

    @property
    def processor(self) -> Processor:
        """The in-process processor (thread mode only)."""
        assert self._processor is not None, "only thread mode processes spans in this process"
        return self._processor

    # -- request side -------------------------------------------------------
    def submit(self, timeline: Timeline) -> None:
        """Queue one finished timeline (what the core's sink does)."""
        self.sink(timeline)

    def _enqueue(self, timeline: Timeline) -> None:
        queued = len(self._queue)
        if queued >= self._max_queue:
            self._dropped += 1
            return
        self._queue.append(timeline if self._processor is not None else timeline.encode())
        if queued == self._wake_at:  # nearly full: drain now, not at the next tick
            self._wake.set()

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> Pipeline:
        self._start_here()
        atexit.register(self.shutdown)
        pipeline = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _start_in_child(pipeline))
        return self

    def _start_here(self) -> None:
        if self.mode == "process":
            if self._handoff_type is not None:
                self._handoff = self._handoff_type(self._max_queue, self._max_queue * _RECORD_BYTES, self._wake.set)
        self._thread = threading.Thread(target=self._run, name="perfkit-export", daemon=True)
        self._thread.start()
        set_sink(self.sink, self.shutdown)

    def restart_in_child(self) -> None:
        """After ``os.fork()`` (gunicorn ``--preload``): the export thread did not
        survive it, and the agent and the queued records are the parent's. The
        child exports its own requests, with a thread, a queue and (at its first
        record) an agent of its own, and none of the parent's counts."""
        if self._stopped.is_set():
            return
        if self._agent is not None:
            self._agent.forget()
        self._agent, self._agent_failed, self._agent_started_at = None, False, float("-inf")
        self._queue, self._dropped, self._handoff = deque(), 0, None
        self._handed = self._handed_to_agent = self._lost = self._tally_sent = 0
        self._tally.clear()  # the parent's requests are the parent's to count
        self._dead_stats = {}
        self._wake, self._stopped, self._lock = threading.Event(), threading.Event(), threading.Lock()
        self._pid = os.getpid()
        if self._processor is not None:
            self._processor = Processor(self.settings, self._processor.exporter)
        self._start_here()

    def stats(self) -> dict[str, int]:
        """exported_spans, dropped_spans, dropped_requests, after a flush (after
        shutdown(): the last counts, as the closed agent or processor left them)."""
        if not self._stopped.is_set():
            self.force_flush()
        if self._processor is not None:
            stats = self._processor.stats()
        else:
            stats = dict(self._agent.last_stats) if self._agent else {}
        stats["dropped_requests"] = max(stats.get("dropped_requests", 0), self.dropped_requests)
        return stats

    def force_flush(self, until: FlushPoint = "exported") -> None:
        """Push out everything queued. ``handed_off``: returns once the agent has
        the records (process mode); ``exported``: once spans are exported."""
        self._drain()
        if until == "handed_off" and self._agent is not None:
            return
        with self._lock:
            if self._processor is not None:
                self._processor.flush_spans()
                self._processor.export_metrics(force=True)
            elif self._agent is not None:
                try:
                    self._agent.flush()
                except (OSError, ValueError) as exc:
                    internal_error("export.agent", exc)

    def shutdown(self) -> None:
        if self._stopped.is_set() or os.getpid() != self._pid:
            return
        set_sink(None)
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=self.settings.timeout_s + 5)
            if self._thread.is_alive() and self._agent is not None:
                # Blocked writing to an agent that reads too slowly (its exports to a
                # hung backend each take the timeout): it drops the rest, or is killed.
                self._agent.give_up()
                self._thread.join(timeout=self.settings.timeout_s + 5)
                if self._thread.is_alive():
                    self._agent.process.kill()
                    self._thread.join(timeout=5)
        self._drain()
        if self._processor is not None:
            self._processor.close()
        if self._agent is not None:
            self._agent.close(timeout_s=self.settings.timeout_s + 5)
        if (self.dropped_requests or self.lost_requests) and self._processor is None:
            logger.warning(
                "perfkit: %d requests were dropped from a full export queue or a failed hand-off, "
                "and %d were lost with the export agent",
                self.dropped_requests,
                self.lost_requests,
            )
        if self.settings.prometheus_dir:
            self._write_health(self.settings.prometheus_dir)

    def _write_health(self, directory: str) -> None:
        """This process's counts for perfkit run's health line; the line itself
        when this is the process perfkit run became (one worker: it serves)."""
        if self._processor is not None:
            stats, internal = self._processor.stats(), 0  # its internal errors are this process's
            dropped = max(stats.get("dropped_requests", 0), self.dropped_requests)
            recorded = stats.get("recorded", 0) + dropped
        else:
            # Counted here, not by the agent, which may have died with its counts.
            stats = dict(self._agent.last_stats) if self._agent else {}
            for name, value in self._dead_stats.items():
                stats[name] = stats.get(name, 0) + value
            internal = stats.get("internal_errors", 0)
            dropped = self.dropped_requests + self.lost_requests
            recorded = self._handed + self.dropped_requests
        try:
            write_health(
                directory,
                {
                    "requests": max(self._tally.requests, recorded),
                    "recorded": recorded,
                    "exported_spans": stats.get("exported_spans", 0),
                    "dropped_spans": stats.get("dropped_spans", 0),
                    "dropped_requests": dropped,
                    "internal_errors": internal + sum(internal_error_counts().values()),
                },
            )
            if os.environ.get(PERFKIT_RUN_PID) == str(os.getpid()):
                print_health_once(directory)
        except OSError as exc:
            internal_error("export.health", exc)

    # -- export thread ------------------------------------------------------
    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.settings.schedule_delay_s)
            self._wake.clear()
            try:
                self._drain()
                if self._processor is not None:
                    with self._lock:
                        self._processor.export_metrics()
            except Exception as exc:
                internal_error("export.thread", exc)

    def _drain(self) -> None:
        with self._lock:
            queue = self._queue
            anchor = time.time_ns() - time.perf_counter_ns()
            if self._processor is not None:
                self._ship_traffic()
                self._drain_into(self._processor, queue, anchor)
                return
            agent = self._started_agent()
            if agent is None:
                return
            self._ship_traffic()
            if self._handoff is not None:
                self._drain_handoff(agent, self._handoff, anchor)
            elif queue:
                self._drain_to_agent(agent, queue, anchor)

    def _started_agent(self) -> AgentProcess | None:
        """The agent; started now if there is something to hand it (process mode),
        or again if it died (killed, out of memory), at most once per ``_RESTART_S``."""
        if self._agent is not None and self._agent.process.poll() is not None:
            self._bury_agent()
        if self._agent is not None or self._agent_failed:
            return self._agent
        if time.monotonic() - self._agent_started_at < _RESTART_S:
            return None  # what is queued waits, or overflows and is counted
        pending = self._handoff.pending if self._handoff is not None else len(self._queue)
        if not pending and self._tally.requests == self._tally_sent:
            return None
        try:
            self._agent = AgentProcess(self.settings)
            self._agent_started_at = time.monotonic()
            self._handed_to_agent = 0
            self._tally_sent = 0  # the new agent has not been told yet
        except OSError as exc:
            self._agent_failed = True
            warn_once(
                "export.agent", "perfkit: cannot start the export agent (%s); requests are dropped and counted", exc
            )
        return self._agent

    def _bury_agent(self) -> None:
        """An agent that died: what it last said stays counted, and what it
        was handed beyond that is counted as lost."""
        agent, self._agent = self._agent, None
        assert agent is not None
        agent.reap()
        self._lost += max(0, self._handed_to_agent - agent.last_stats.get("recorded", 0))
        for name in ("exported_spans", "dropped_spans", "internal_errors"):
            self._dead_stats[name] = self._dead_stats.get(name, 0) + agent.last_stats.get(name, 0)
        warn_once(
            "export.agent.died",
            "perfkit: the export agent died (%s); a new one is started, and what it held is counted as dropped",
            f"exit code {agent.process.returncode}",
        )

    def _ship_traffic(self) -> None:
        """Hand the tally of every request to the metrics, when it grew."""
        requests = self._tally.requests
        if requests == self._tally_sent:
            return
        try:
            if self._processor is not None:
                keep(self._processor.metrics, Traffic.of(self._tally))
                self._processor.changed()
            elif self._agent is not None:
                try:
                    self._agent.send_frame(traffic_frame(self._tally))
                except (OSError, ValueError):
                    return  # the agent is gone: said by the batch that finds it so
        except Exception as exc:
            internal_error("export.traffic", exc)
            return
        self._tally_sent = requests

    @staticmethod
    def _drain_into(processor: Processor, queue: deque[Timeline], anchor: int) -> None:
        handled = 0
        while queue:
            processor.handle(queue.popleft().freeze(), anchor)
            handled += 1
            if handled % _SLICE == 0:
                time.sleep(0)
        processor.flush_spans()

    def _drain_to_agent(self, agent: AgentProcess, queue: deque[bytes], anchor: int) -> None:
        records: list[bytes] = []
        while queue:
            records.append(queue.popleft())
        try:
            agent.send_frame(batch_frame(anchor, self.dropped_requests, records))
            self._handed += len(records)
            self._handed_to_agent += len(records)
        except (OSError, ValueError) as exc:
            self._dropped += len(records)
            warn_once("export.agent", "perfkit: the export agent is gone (%s); requests are dropped and counted", exc)

    def _drain_handoff(self, agent: AgentProcess, handoff: Any, anchor: int) -> None:
        try:
            written = handoff.write_frame(agent.fileno(), anchor)  # the records are counted as dropped if it fails
            self._handed += written
            self._handed_to_agent += written
        except (OSError, ValueError) as exc:
            warn_once("export.agent", "perfkit: the export agent is gone (%s); requests are dropped and counted", exc)
