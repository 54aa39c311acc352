"""Collect finished timelines in-process, without an exporter."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from litellm_perfkit._core._sink import set_sink
from litellm_perfkit._core._timeline import Timeline
from litellm_perfkit.types import RequestRecord


class Captured(list[RequestRecord]):
    pass


@contextlib.contextmanager
def capture_records() -> Iterator[Captured]:
    records = Captured()

    def sink(timeline: Timeline) -> None:
        records.append(timeline.freeze())

    set_sink(sink)
    try:
        yield records
    finally:
        set_sink(None)
