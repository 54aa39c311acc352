"""The fault matrix on the real LiteLLM proxy under ``perfkit run`` with 2
workers (tests/support/proxy_faults.py, docs/reliability.md): with its OTLP
backend down or hung, or an export agent killed, the proxy answers as it
does without perfkit, every request sent is counted once, every recorded one
is exported or counted as dropped, and after it exits no process is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_matrix import FAULTS, Fault
from tests.support.proxy_faults import ProxyRun, proxy_run

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

LOAD_S = 3.0
VERSION = "1.103.0"
CHOSEN = ("none (backend up)", "backend down (connection refused)", "backend hung", "export agent SIGKILLed mid-run")
_plain: list[ProxyRun] = []


def _reference(tmp_path_factory: pytest.TempPathFactory) -> ProxyRun:
    if not _plain:
        _plain.append(proxy_run(VERSION, FAULTS[0], tmp_path_factory.mktemp("plain"), LOAD_S, plain=True))
    return _plain[0]


@pytest.mark.parametrize("fault", [f for f in FAULTS if f.name.startswith(CHOSEN)], ids=lambda f: f.name.split(" (")[0])
def test_the_proxy_is_unchanged_and_nothing_is_lost(
    fault: Fault, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    plain = _reference(tmp_path_factory)
    run = proxy_run(VERSION, fault, tmp_path, LOAD_S)
    counts = run.health
    said = f"{fault.name}: {counts}, sent {run.sent}, acknowledged {run.acknowledged_spans}\n{run.log[-3000:]}"
    for answer, reference in zip(run.answers, plain.answers):
        assert answer.status_line == reference.status_line and answer.body == reference.body, (answer, reference)
        assert answer.headers == reference.headers, set(answer.headers) ^ set(reference.headers)
    assert counts["requests"] == counts["recorded"] == run.served >= run.sent, said
    assert counts["exported_spans"] <= run.acknowledged_spans, said
    assert counts["internal_errors"] == 0, said
    if fault.backend == "ok" and fault.during == "nothing":
        assert counts["dropped_spans"] == counts["dropped_requests"] == 0, said
        assert counts["exported_spans"] == run.acknowledged_spans > 0, said
    else:
        assert counts["dropped_spans"] + counts["dropped_requests"] > 0, said
    assert run.zombies == 0 and run.left == [], said
    # A worker the warm-up reached less grows to the others' size: no worker past the largest by much.
    warmed = max(u.rss_mib for u in run.before)
    for after in run.after:
        assert after.rss_mib < warmed + 16 and after.fds <= max(u.fds for u in run.before) + 4, (run.before, run.after)
        assert len(after.agents) == 1, run.after  # a killed agent was replaced
