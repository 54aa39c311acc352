from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.markers import EXTERNAL_MARKERS, forbidding_external_tools
from tests.support.servers import Jaeger, jaeger_process
from tests.support.speedscope import speedscope_validator

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


@pytest.fixture(scope="session")
def validate_speedscope() -> Callable[[dict[str, Any]], None]:
    """speedscope's own schema check; a session fixture, so its one-time npm fetch is setup, outside any test's guard."""
    return speedscope_validator()


# The first part's longest files (minutes each, in a run of .ci/run), started first: one of them
# started last finishes alone while the other workers idle. pytest-xdist hands out files in this
# order with --no-loadscope-reorder (pyproject.toml), the rest in collection order.
LONGEST_FIRST = (
    "tests/litellm/test_fault_matrix.py",
    "tests/test_benchmarks.py",
    "tests/test_pythons.py",
    "tests/litellm/test_proxy.py",
    "tests/bench/test_stop_moments.py",
    "tests/export/test_fault_matrix.py",
    "tests/litellm/test_prometheus.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first; a test that asks for Jaeger without the integration marker fails
    at collection (tests/support/markers.py)."""
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    unmarked = [item.nodeid for item in items if "jaeger" in getattr(item, "fixturenames", ()) and not _marked(item)]
    if unmarked:
        raise pytest.UsageError("these use the jaeger fixture without @pytest.mark.integration: " + ", ".join(unmarked))


def _marked(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in EXTERNAL_MARKERS)


@pytest.fixture(autouse=True)
def _unmarked_tests_start_no_outside_program(request: pytest.FixtureRequest) -> Iterator[None]:
    """An unmarked test that starts a proxy, Jaeger, a browser or another interpreter fails, naming the marker."""
    if _marked(request.node):
        yield
        return
    with forbidding_external_tools(request.node.nodeid):
        yield
