from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import Jaeger, jaeger_process


@pytest.fixture(scope="session")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    with jaeger_process(tmp_path_factory.mktemp("jaeger")) as server:
        yield server
