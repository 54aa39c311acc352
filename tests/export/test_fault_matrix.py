"""The fault matrix on a small instrumented app (tests/support/fault_matrix.py,
docs/reliability.md): under load from ``perfkit load``, with its OTLP backend
down, hung, slow, failing or restarted, its export agent killed, its clients
or its upstream failing mid-stream, and hostile requests, the app answers
exactly as it does without perfkit, every request is counted once, every
recorded one is exported or counted as dropped, and memory, descriptors and
processes stay as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_matrix import FAULTS, Fault, Row, Run, measure, plain_run
from tests.support.probes import Probe

pytestmark = pytest.mark.integration

LOAD_S = 2.0
SPANS_PER_REQUEST = 3  # fault_app: the request's span, its auth and upstream stages (serialize for JSON)
_plain: dict[tuple[object, tuple[Probe, ...]], Run] = {}


def _reference(fault: Fault, tmp_path_factory: pytest.TempPathFactory) -> Run:
    key = (fault.shape, fault.probes)
    if key not in _plain:
        _plain[key] = plain_run(fault.shape, fault.probes, tmp_path_factory.mktemp("plain"), LOAD_S)
    return _plain[key]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name.split(" (")[0] for f in FAULTS])
def test_the_app_is_unchanged_and_nothing_is_lost(
    fault: Fault, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    row: Row = measure(fault, tmp_path, _reference(fault, tmp_path_factory), LOAD_S)
    run, counts = row.run, row.run.health
    said = f"{fault.name}: {counts}, acknowledged {row.acknowledged_spans}, log: {run.warnings}"
    assert row.answers_equal, [(a, b) for a, b in zip(run.answers, row.plain.answers) if a != b][:1]
    assert run.load["summary"]["requests"] > 0, said
    # Every request the app served is counted once, and recorded (record rate: all).
    assert counts["requests"] == counts["recorded"] == run.served, said
    # What perfkit says it exported, the backend acknowledged (a timed-out
    # export the backend took late is counted dropped: never the other way).
    assert counts["exported_spans"] <= row.acknowledged_spans, said
    # Every recorded request's spans were exported or counted as dropped, or
    # the request itself was counted as dropped (lost with a killed agent).
    handled = counts["recorded"] - counts["dropped_requests"]
    assert counts["exported_spans"] + counts["dropped_spans"] >= SPANS_PER_REQUEST * handled, said
    assert counts["internal_errors"] == 0, said
    if fault.backend == "ok" and fault.during == "nothing":
        assert counts["dropped_spans"] == counts["dropped_requests"] == 0, said
        assert counts["exported_spans"] == row.acknowledged_spans, said
        # One request span delivered for each request served, with its status.
        assert sum(row.request_errors.values()) == run.served, (row.request_errors, said)
        if fault.name.startswith("clients disconnect"):
            cut = run.load["summary"]["errors_by_class"].get("timeout", 0)
            assert row.request_errors.get("client_disconnected", 0) >= cut > 0, row.request_errors
        if fault.name.startswith("upstream resets"):
            assert row.request_errors == {"RemoteProtocolError": run.served}, row.request_errors
    else:
        assert counts["dropped_spans"] + counts["dropped_requests"] > 0, said
    assert len(run.warnings) == len(set(run.warnings)), run.warnings  # each said once, with how many
    # Memory, descriptors and processes: as they were after the warm-up.
    assert run.after.rss_mib - run.before.rss_mib < 8, (run.before, run.after)
    # Sockets: the app's upstream pool keeps up to a connection per request in flight.
    assert run.after.own_fds - run.before.own_fds <= 2, (run.before, run.after)
    assert run.after.sockets - run.before.sockets <= fault.shape.concurrency, (run.before, run.after)
    assert run.zombies == 0 and len(run.after.agents) == 1, run.after
