"""perfkit's metrics in Prometheus' text format, merged over every worker.

Each worker's export pipeline writes its histograms and counters to
``PERFKIT_PROMETHEUS_DIR/<pid>.json`` at most once a second, and within a
second of its last request (a rename, so a reader never sees half a file);
one HTTP server, in the process ``perfkit
run`` became, serves ``/metrics`` as the sum over every file. A worker that
exited keeps its file, so totals never go down while the proxy runs.
Histograms keep perfkit's own bucket bounds; values are in seconds.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from .._wire._environment_variables import PERFKIT_PROMETHEUS_DIR
from .._wire._names import Metric
from ._metrics import BOUNDARIES_NS, COUNTER_DESCRIPTIONS, DESCRIPTIONS, MetricStore
from ._traffic import REQUESTS_DESCRIPTION

__all__ = ["REQUESTS_FAMILY", "Collector", "SnapshotWriter", "add_to_registry", "merged", "render", "serve_prometheus"]


def _label(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


# perfkit's metric -> its Prometheus family: every metric is perfkit.-named
# (LiteLLM's own /metrics and the OTel conventions use other definitions).
FAMILIES = {name: _label(name) + "_seconds" for name in DESCRIPTIONS}
REQUESTS_FAMILY = _label(Metric.REQUESTS) + "_total"
"""The counter of every request, as its samples are named on the page."""


SNAPSHOT_INTERVAL_S = 1.0
"""How often, at most, a pipeline writes its snapshot: a page lags the traffic by up to this."""


class SnapshotWriter:
    """Writes one pipeline's metrics for the Prometheus server.

    At most once per ``interval_s``: a write asked for sooner is held back,
    and ``due_in`` says when to ask again. Written after every batch, the
    snapshot was 6% of the export agent's CPU under load (docs/overhead.md),
    and a scrape every few seconds reads one in many."""

    def __init__(
        self, directory: str, interval_s: float = SNAPSHOT_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = Path(directory) / f"{os.getpid()}.json"
        self._interval_s, self._clock = interval_s, clock
        self._written_at = -interval_s
        self._unwritten = True  # the metrics changed since the last write (or none was made)

    def changed(self) -> None:
        """The metrics changed: the next write that is due writes them."""
        self._unwritten = True

    def write(self, store: MetricStore, force: bool = False) -> None:
        """Write now if the metrics changed and a write is due, or if ``force``."""
        now = self._clock()
        if not force and (not self._unwritten or now - self._written_at < self._interval_s):
            return
        self._unwritten, self._written_at = False, now
        histograms = [
            [name, [list(a) for a in attributes], h.counts, h.count, h.total_ns]
            for (name, attributes), h in store.snapshot()
        ]
        requests = [[[list(a) for a in attributes], value] for attributes, value in store.traffic_counters]
        document = orjson.dumps({"histograms": histograms, "counters": dict(store.counters), "requests": requests})
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            out.write(document)
        os.replace(temporary, self.path)

    def due_in(self) -> float | None:
        """Seconds until changed metrics are due to be written (0: now), or None when nothing changed."""
        return max(0.0, self._written_at + self._interval_s - self._clock()) if self._unwritten else None


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


Series = list[tuple[tuple[tuple[str, Any], ...], list[Any]]]  # (attributes, [bucket counts, count, total ns])


Labelled = list[tuple[tuple[tuple[str, Any], ...], int]]  # (attributes, value)


def merged(directory: str) -> tuple[dict[str, Series], dict[str, int], Labelled]:
    """Every snapshot in ``directory``, summed: each family's series, the
    counters, and ``perfkit.requests`` by its labels."""
    histograms: dict[tuple[str, tuple[tuple[str, Any], ...]], list[Any]] = {}
    counters: dict[str, int] = {}
    requests: dict[tuple[tuple[str, Any], ...], int] = {}
    for path in sorted(Path(directory).glob("*.json")):
        try:
            snapshot = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # being replaced, or gone
        for name, attributes, counts, count, total_ns in snapshot["histograms"]:
            key = (name, tuple((k, v) for k, v in attributes))
            merged = histograms.setdefault(key, [[0] * len(counts), 0, 0])
            merged[0] = [a + b for a, b in zip(merged[0], counts)]
            merged[1] += count
            merged[2] += total_ns
        for name, value in snapshot["counters"].items():
            counters[name] = counters.get(name, 0) + value
        for attributes, value in snapshot.get("requests", ()):
            labels = tuple((k, v) for k, v in attributes)
            requests[labels] = requests.get(labels, 0) + value
    by_family: dict[str, Series] = {}
    for (name, attributes), sums in sorted(histograms.items(), key=lambda item: (item[0][0], str(item[0][1]))):
        family = FAMILIES.get(name)
        if family is not None:
            by_family.setdefault(family, []).append((attributes, sums))
    return by_family, counters, sorted(requests.items(), key=lambda item: str(item[0]))


_NAMES = {family: name for name, family in FAMILIES.items()}


def _buckets(counts: list[int]) -> list[tuple[str, int]]:
    """(le in seconds, cumulative count) per bucket, +Inf last."""
    cumulative, buckets = 0, []
    for bound, bucket in zip([*BOUNDARIES_NS, None], counts):
        cumulative += bucket
        buckets.append(("+Inf" if bound is None else repr(bound / 1e9), cumulative))
    return buckets


def render(directory: str) -> str:
    """The text exposition of every snapshot in ``directory``, summed."""
    by_family, counters, requests = merged(directory)
    lines: list[str] = []
    for family, series in by_family.items():
        lines.append(f"# HELP {family} {_escape(DESCRIPTIONS.get(_NAMES[family], _NAMES[family]))}")
        lines.append(f"# TYPE {family} histogram")
        for attributes, (counts, count, total_ns) in series:
            labels = ",".join(f'{_label(k)}="{_escape(v)}"' for k, v in attributes)
            for le, cumulative in _buckets(counts):
                lines.append(f'{family}_bucket{{{labels + "," if labels else ""}le="{le}"}} {cumulative}')
            braces = f"{{{labels}}}" if labels else ""
            lines.append(f"{family}_sum{braces} {total_ns / 1e9!r}")
            lines.append(f"{family}_count{braces} {count}")
    if requests:
        family = REQUESTS_FAMILY
        lines += [f"# HELP {family} {_escape(REQUESTS_DESCRIPTION)}", f"# TYPE {family} counter"]
        for attributes, value in requests:
            labels = ",".join(f'{_label(k)}="{_escape(v)}"' for k, v in attributes)
            lines.append(f"{family}{{{labels}}} {value}")
    for name, value in sorted(counters.items()):
        family = _label(name) + "_total"
        help_line = COUNTER_DESCRIPTIONS.get(name)
        lines += [*([f"# HELP {family} {_escape(help_line)}"] if help_line else []), f"# TYPE {family} counter"]
        lines.append(f"{family} {value}")
    return "\n".join(lines) + "\n"


class Collector:
    """perfkit's families for a ``prometheus_client`` registry (LiteLLM's own
    ``/metrics``): every worker's snapshots in ``directory``, summed, as the
    server of ``serve_prometheus`` gives them."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        by_family, counters, requests = merged(self.directory)
        for family, series in by_family.items():
            labels = [_label(k) for k, _ in series[0][0]]
            metric = HistogramMetricFamily(family, DESCRIPTIONS.get(_NAMES[family], family), labels=labels)
            for attributes, (counts, _count, total_ns) in series:
                metric.add_metric([str(v) for _, v in attributes], _buckets(counts), total_ns / 1e9)
            yield metric
        if requests:
            labels = [_label(k) for k, _ in requests[0][0]]
            counter = CounterMetricFamily(_label(Metric.REQUESTS), REQUESTS_DESCRIPTION, labels=labels)
            for attributes, value in requests:
                counter.add_metric([str(v) for _, v in attributes], value)
            yield counter
        for name, value in sorted(counters.items()):
            yield CounterMetricFamily(_label(name), COUNTER_DESCRIPTIONS.get(name, name), value=value)


def add_to_registry(registry: Any) -> None:
    """Put perfkit's families in a ``prometheus_client`` registry (None: its
    default one), once, when the process's pipelines write snapshots."""
    directory = os.environ.get(PERFKIT_PROMETHEUS_DIR)
    if not directory:
        return
    if registry is None:
        from prometheus_client import REGISTRY as registry
    if not any(isinstance(c, Collector) for c in getattr(registry, "_collector_to_names", {})):
        registry.register(Collector(directory))


def serve_prometheus(port: int, host: str = "127.0.0.1", directory: str | None = None) -> ThreadingHTTPServer:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread, over every
    pipeline that writes to ``directory`` (default: ``$PERFKIT_PROMETHEUS_DIR``,
    or a new one, set in the environment for the pipelines started after this)."""
    where = directory or os.environ.get(PERFKIT_PROMETHEUS_DIR) or tempfile.mkdtemp(prefix="perfkit-prometheus-")
    os.environ[PERFKIT_PROMETHEUS_DIR] = where
    Path(where).mkdir(parents=True, exist_ok=True)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "perfkit serves /metrics")
                return
            body = render(where).encode()
            self.send_response(200)
            self.send_header("content-type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="perfkit-prometheus", daemon=True).start()
    return server
