"""The export agent: a child process that turns timelines into spans and metrics.

Started by a ``process``-mode Pipeline. It reads frames from stdin (a kind
byte, a 4-byte little-endian length, a payload: for a batch, the anchor, the
app's drop count and ``Timeline.encode`` records, decoded into ``RequestRecord``; see _pipeline), and writes one JSON
stats line to stdout per flush and at exit. EOF on stdin means: flush, export
metrics, exit. If its parent dies, stdin closes, so the agent never outlives it.
"""

from __future__ import annotations

import os
import signal
import sys

import orjson

from .._core._timeline import decode
from ._pipeline import FRAME_BATCH, FRAME_FLUSH, Processor, read_batch
from ._settings import ExportSettings


def _read_exact(stream: object, size: int) -> bytes:
    read = stream.read  # type: ignore[attr-defined]
    data = b""
    while len(data) < size:
        chunk = read(size - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def main() -> int:
    # Ctrl-C, and a stop sent to the whole process group or cgroup (kill -- -PGID,
    # systemd's default), reach the agent too: it leaves shutdown to the app,
    # and exits on EOF after flushing what it has. EOF also comes when the app
    # is killed outright, so the agent never outlives it.
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)
    settings = ExportSettings(**orjson.loads(os.environ["PERFKIT_AGENT_SETTINGS"]))
    processor = Processor(settings)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def report() -> None:
        try:
            stdout.write(orjson.dumps(processor.stats()) + b"\n")
            stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the app is gone (killed); nobody is left to read the stats

    while True:
        header = _read_exact(stdin, 5)
        if not header:
            break
        kind, length = header[:1], int.from_bytes(header[1:], "little")
        payload = _read_exact(stdin, length) if length else b""
        if kind == FRAME_BATCH:
            anchor, parent_dropped, records = read_batch(payload)
            counters = processor.metrics.counters
            counters["perfkit.requests.dropped"] = max(counters["perfkit.requests.dropped"], parent_dropped)
            for encoded in records:
                processor.handle(decode(encoded), anchor)
            processor.flush_spans()
            processor.export_metrics()
        elif kind == FRAME_FLUSH:
            processor.flush_spans()
            processor.export_metrics(force=True)
            report()
    processor.close()
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
