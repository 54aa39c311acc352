"""The fault matrix on the real LiteLLM proxy under ``perfkit run`` with 2
workers, on both pinned versions (tests/support/proxy_faults.py,
docs/reliability.md): one proxy per version takes every row in turn (its
OTLP backend slow, failing, hung, down or restarted, an export agent
killed, clients and upstreams failing mid-stream, hostile requests), the
same rows going first through the same proxy without perfkit. Per row, the
answers are the plain proxy's, and the row's records were delivered (one
request span per request served) or counted dropped; over the run, every
request served is counted once, memory and descriptors stay bounded, and
after the proxy exits no process is left."""

from __future__ import annotations

import sys

import pytest

from tests.support.probes import refused_before_any_app
from tests.support.proxy_faults import ROWS, MatrixRun, ProxyFault, ProxyPass, matrix_run, table, totals

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

LOAD_S = 2.0
VERSIONS = ("1.83.14", "1.103.0")
_runs: dict[str, MatrixRun] = {}


def _run(version: str, tmp_path_factory: pytest.TempPathFactory) -> MatrixRun:
    if version not in _runs:
        _runs[version] = matrix_run(version, tmp_path_factory.mktemp(f"matrix-{version}"), LOAD_S)
        print(f"\n{table(_runs[version])}\n{totals(_runs[version])}", file=sys.stderr)  # shown with -s
    return _runs[version]


@pytest.mark.parametrize("fault", ROWS, ids=lambda f: f.name.split(" (")[0])
@pytest.mark.parametrize("version", VERSIONS)
def test_each_row_answers_as_plain_and_its_records_are_delivered_or_counted_dropped(
    version: str, fault: ProxyFault, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run = _run(version, tmp_path_factory)
    index = ROWS.index(fault)
    plain, row = run.plain.rows[index], run.perfkit.rows[index]
    said = f"{version} {fault.name}: served {row.served}, delivered {row.request_spans}, dropped {row.dropped}"
    for answer, reference in zip(row.answers, plain.answers, strict=True):
        if refused_before_any_app(answer) != refused_before_any_app(reference):
            # uvicorn refused one run's hostile head before any app, after every resend (how its read
            # splits the head decides): that pair compares uvicorn with an app, not perfkit with none.
            print(f"  {version} {fault.name}: one run's probe never passed uvicorn", file=sys.stderr)
            assert not answer.status_line.startswith(b"HTTP/1.1 5"), answer  # nothing raised into the app
            continue
        assert answer.status_line == reference.status_line and answer.body == reference.body, (answer, reference)
        assert answer.headers == reference.headers, set(answer.headers) ^ set(reference.headers)
    assert row.load["summary"]["requests"] > 0 and row.served > 0, said
    delivered = sum(row.request_spans.values())
    if fault.ending == "dropped":
        assert row.dropped > 0, said
    elif fault.model == "slow-stream":
        # uvicorn logs no request whose client left before the answer began; perfkit counts it.
        assert row.served <= delivered <= row.sent and row.dropped == 0, said
        assert row.request_spans.get("client_disconnected", 0) > 0, said  # those cut mid-stream
    elif fault.during == "kill agent":
        lost = run.perfkit.health["dropped_requests"]  # what the killed agent held, counted at exit
        assert row.served - lost <= delivered <= row.served, said
    else:
        # One request span delivered per request served, nothing dropped.
        assert delivered == row.served and row.dropped == 0, said


def sockets_added(side: ProxyPass) -> int:
    """The workers' sockets together, after the rows less after the warm-up."""
    return sum(u.sockets for u in side.after) - sum(u.sockets for u in side.before)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_request_is_counted_once_and_nothing_is_left(
    version: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run = _run(version, tmp_path_factory)
    perfkit, counts = run.perfkit, run.perfkit.health
    said = f"{version}: {counts}, served {perfkit.served}, acknowledged {perfkit.acknowledged_spans}"
    # Every request is counted once: those the access log has, and at most those it missed.
    unlogged = sum(max(0, row.sent - row.served) for row in perfkit.rows)
    assert counts["requests"] == counts["recorded"], said
    assert perfkit.served <= counts["requests"] <= perfkit.served + unlogged, said
    assert counts["exported_spans"] <= perfkit.acknowledged_spans, said
    assert counts["internal_errors"] == 0, said
    assert perfkit.zombies == 0 and perfkit.supervisor_agents == 0 and perfkit.left == [], said
    # A worker the warm-up reached less grows to the others' size: none past the largest by much
    # more than the plain proxy grew over the same rows. Descriptors: perfkit may add at most 4 files
    # or pipes to a worker. Sockets are the proxy's: its pools keep a connection per request that was
    # in flight to an upstream the rows reached, and which worker accepts a request is chance, so the
    # workers' sockets together may pass the plain proxy's growth by at most the rows' concurrency.
    warmed, own_fds = max(u.rss_mib for u in perfkit.before), max(u.own_fds for u in perfkit.before)
    plain_grew = max(u.rss_mib for u in run.plain.after) - max(u.rss_mib for u in run.plain.before)
    in_flight = max(fault.shape.concurrency for fault in ROWS)
    assert sockets_added(perfkit) <= max(0, sockets_added(run.plain)) + in_flight, (perfkit.before, perfkit.after)
    for after in perfkit.after:
        assert after.rss_mib < warmed + max(0, plain_grew) + 32, (perfkit.before, perfkit.after, plain_grew)
        assert after.own_fds <= own_fds + 4, (perfkit.before, perfkit.after)
        assert len(after.agents) == 1, perfkit.after  # a killed agent was replaced
