"""What the app and its export agent say to each other.

The app writes frames to the agent's stdin (their heads are declared in
_core/_layouts.py): a batch holds the anchor, the app's drop count and
``Timeline.encode`` records. ``GIVE_UP_SIGNAL`` tells the agent to drop what
it holds instead of exporting it.
"""

from __future__ import annotations

import signal

from .._core._layouts import BATCH_HEAD, FRAME_HEAD, RECORD_HEAD, FrameKind

__all__ = ["GIVE_UP_SIGNAL", "batch_frame", "read_batch"]

GIVE_UP_SIGNAL = signal.SIGUSR1
"""Sent to the agent at a shutdown that cannot wait for its exports (_agent.py)."""


def batch_frame(anchor: int, dropped: int, records: list[bytes]) -> bytes:
    """A batch frame from encoded records (the path without the C hand-off)."""
    parts = [BATCH_HEAD.pack(anchor, dropped)]
    for record in records:
        parts += (RECORD_HEAD.pack(len(record)), record)
    payload = b"".join(parts)
    return FRAME_HEAD.pack(FrameKind.BATCH, len(payload)) + payload


def read_batch(payload: bytes) -> tuple[int, int, list[bytes]]:
    """(anchor, the app's drop count, records) of a batch frame's payload."""
    view = memoryview(payload)
    anchor, dropped = BATCH_HEAD.unpack_from(view)
    records, at, head = [], BATCH_HEAD.size, RECORD_HEAD.size
    while at < len(view):
        (size,) = RECORD_HEAD.unpack_from(view, at)
        records.append(bytes(view[at + head : at + head + size]))
        at += head + size
    return anchor, dropped, records
