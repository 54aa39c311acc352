"""perfkit's metrics in Prometheus' text format, merged over every worker.

Each worker's export pipeline writes its histograms and counters to
``PERFKIT_PROMETHEUS_DIR/<pid>.json`` after each batch of requests (a
rename, so a reader never sees half a file); one HTTP server, in the process ``perfkit
run`` became, serves ``/metrics`` as the sum over every file. A worker that
exited keeps its file, so totals never go down while the proxy runs.
Histograms keep perfkit's own bucket bounds; values are in seconds.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from .._wire._names import PROMETHEUS_DIR_VARIABLE
from ._metrics import BOUNDARIES_NS, DESCRIPTIONS, MetricStore

__all__ = ["SnapshotWriter", "render", "serve_prometheus"]

def _label(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


# perfkit's metric -> its Prometheus family: every metric is perfkit.-named
# (LiteLLM's own /metrics and the OTel conventions use other definitions).
FAMILIES = {name: _label(name) + "_seconds" for name in DESCRIPTIONS}


class SnapshotWriter:
    """Writes one pipeline's metrics for the Prometheus server after each
    batch of requests (the export drains every 200 ms, at most)."""

    def __init__(self, directory: str) -> None:
        self.path = Path(directory) / f"{os.getpid()}.json"

    def write(self, store: MetricStore) -> None:
        histograms = [[name, [list(a) for a in attributes], h.counts, h.count, h.total_ns] for (name, attributes), h in store.snapshot()]
        document = orjson.dumps({"histograms": histograms, "counters": dict(store.counters)})
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            out.write(document)
        os.replace(temporary, self.path)


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(directory: str) -> str:
    """The text exposition of every snapshot in ``directory``, summed."""
    histograms: dict[tuple[str, tuple[tuple[str, Any], ...]], list[Any]] = {}
    counters: dict[str, int] = {}
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
    lines: list[str] = []
    by_family: dict[str, list[tuple[tuple[tuple[str, Any], ...], list[Any]]]] = {}
    for (name, attributes), merged in sorted(histograms.items(), key=lambda item: (item[0][0], str(item[0][1]))):
        family = FAMILIES.get(name)
        if family is not None:
            by_family.setdefault(family, []).append((attributes, merged))
    names = {family: name for name, family in FAMILIES.items()}
    for family, series in by_family.items():
        lines.append(f"# HELP {family} {_escape(DESCRIPTIONS.get(names[family], names[family]))}")
        lines.append(f"# TYPE {family} histogram")
        for attributes, (counts, count, total_ns) in series:
            labels = ",".join(f'{_label(k)}="{_escape(v)}"' for k, v in attributes)
            cumulative = 0
            for bound, bucket in zip([*BOUNDARIES_NS, None], counts):
                cumulative += bucket
                le = "+Inf" if bound is None else repr(bound / 1e9)
                lines.append(f'{family}_bucket{{{labels + "," if labels else ""}le="{le}"}} {cumulative}')
            braces = f"{{{labels}}}" if labels else ""
            lines.append(f"{family}_sum{braces} {total_ns / 1e9!r}")
            lines.append(f"{family}_count{braces} {count}")
    for name, value in sorted(counters.items()):
        family = _label(name) + "_total"
        lines += [f"# TYPE {family} counter", f"{family} {value}"]
    return "\n".join(lines) + "\n"


def serve_prometheus(port: int, host: str = "127.0.0.1", directory: str | None = None) -> ThreadingHTTPServer:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread, over every
    pipeline that writes to ``directory`` (default: ``$PERFKIT_PROMETHEUS_DIR``,
    or a new one, set in the environment for the pipelines started after this)."""
    where = directory or os.environ.get(PROMETHEUS_DIR_VARIABLE) or tempfile.mkdtemp(prefix="perfkit-prometheus-")
    os.environ[PROMETHEUS_DIR_VARIABLE] = where
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
