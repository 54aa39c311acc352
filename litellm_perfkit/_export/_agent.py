"""The export agent: a child process that turns timelines into spans and metrics.

Started by a ``process``-mode Pipeline. It reads frames from stdin (declared in
_core/_layouts.py: a kind, a length, a payload; for a batch, the anchor, the
app's drop count and ``Timeline.encode`` records, decoded into ``RequestRecord``;
for the traffic, the worker's whole tally), and writes one JSON
stats line to stdout per flush and at exit. EOF on stdin means: flush, export
metrics, exit. If its parent dies, stdin closes, so the agent never outlives it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from typing import Literal

import orjson

from .._core._layouts import FRAME_HEAD, FrameKind
from .._core._timeline import decode
from .._wire._environment_variables import PERFKIT_AGENT_SETTINGS
from .._wire._names import Metric
from ._frames import GIVE_UP_SIGNAL, read_batch
from ._processor import Processor
from ._reaper import name_agent
from ._settings import ExportSettings
from ._traffic import keep, read_traffic


class _Frames:
    """Frames from a file descriptor, read without a buffered reader so that
    a wait for the next one can time out (``select``): the agent writes a
    held-back Prometheus snapshot when the app goes quiet."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()

    def _fill(self, size: int, timeout_s: float | None) -> bool | None:
        """Until ``size`` bytes are buffered: True; EOF: False; nothing came in ``timeout_s``: None."""
        while len(self._buffer) < size:
            if timeout_s is not None and not self._buffer and not select.select([self._fd], [], [], timeout_s)[0]:
                return None
            chunk = os.read(self._fd, max(size - len(self._buffer), 1 << 16))
            if not chunk:
                return False
            self._buffer += chunk
        return True

    def next(self, timeout_s: float | None) -> tuple[bytes, bytes] | None | Literal[False]:
        """(kind, payload) of the next frame; None if none began within ``timeout_s``; False at EOF."""
        head = FRAME_HEAD.size
        filled = self._fill(head, timeout_s)
        if not filled:
            return filled
        kind, length = FRAME_HEAD.unpack_from(self._buffer)
        if not self._fill(head + length, None):
            return False
        payload = bytes(self._buffer[head : head + length])
        del self._buffer[: head + length]
        return kind, payload


def main() -> int:
    # Ctrl-C, and a stop sent to the whole process group or cgroup (kill -- -PGID,
    # systemd's default), reach the agent too: it leaves shutdown to the app,
    # and exits on EOF after flushing what it has. EOF also comes when the app
    # is killed outright, so the agent never outlives it.
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)
    name_agent()  # so that a process that adopts it once its app is killed can reap it (_reaper)
    settings = ExportSettings(**orjson.loads(os.environ[PERFKIT_AGENT_SETTINGS]))
    processor = Processor(settings)
    # The app's shutdown cannot wait for the rest (a hung backend): drop and count it.
    signal.signal(GIVE_UP_SIGNAL, lambda signum, frame: setattr(processor, "gave_up", True))
    stdout = sys.stdout.buffer

    def report() -> None:
        try:
            stdout.write(orjson.dumps(processor.stats()) + b"\n")
            stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the app is gone (killed); nobody is left to read the stats

    frames = _Frames(sys.stdin.fileno())
    while True:
        frame = frames.next(processor.metrics_due_in())
        if frame is False:
            break
        if frame is None:  # quiet: write the held-back snapshot
            processor.export_metrics()
            continue
        kind, payload = frame
        if kind == FrameKind.BATCH:
            anchor, parent_dropped, records = read_batch(payload)
            counters = processor.metrics.counters
            counters[Metric.REQUESTS_DROPPED] = max(counters[Metric.REQUESTS_DROPPED], parent_dropped)
            for encoded in records:
                processor.handle(decode(encoded), anchor)
            processor.flush_spans()
            processor.export_metrics()
        elif kind == FrameKind.TRAFFIC:
            keep(processor.metrics, read_traffic(payload))
            processor.changed()
            processor.export_metrics()
        elif kind == FrameKind.FLUSH:
            processor.flush_spans()
            processor.export_metrics(force=True)
            report()
    processor.close()
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
