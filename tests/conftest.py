from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.servers import Jaeger, jaeger_process

# Tests count what perfkit recorded, so they record every request, in this
# process and in every proxy they start. The default rate (10 a second per
# process) has its own tests, which unset this (tests/core/test_sampling.py,
# tests/litellm/test_prometheus.py).
os.environ["PERFKIT_RECORD_RATE"] = "all"
# And hand them to the export agent soon, as perfkit bench does: tests wait
# for spans in Jaeger or a receiver. The default (5 s) has its own test
# (tests/export/test_settings.py).
os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "200"


@pytest.fixture(scope="session")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    with jaeger_process(tmp_path_factory.mktemp("jaeger")) as server:
        yield server
