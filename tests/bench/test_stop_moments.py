"""SIGTERM at random moments of ``perfkit bench`` on the real LiteLLM proxy:
every process it started (mock, proxy, workers, export agents; zombies
count) is gone within 10 s, every time.

Here one moment per stage a run (start-up, a direct phase, the proxy's
start-up, each proxy phase, the idle phase and the stop after it), at a
random offset into it, and 2 s into the proxy's non-streaming phase;
``benchmarks/bench_sigterm.py`` takes 30 over every stage
(docs/reliability.md). The phases are shorter here than there (direct 1 s,
not perfkit bench's 10 s; through the proxy 1 s warm-up and 2 s measured,
not 2 and 4): a phase stops the same way however long it is set to run, and
the later stages are reached sooner.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.support.litellm_env import litellm_python
from tests.support.stop_probe import Moment, Phases, bench_command, bench_stages, moments, stop_at

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

# One seed for every pytest-xdist worker of a run (each collects the tests, and their ids must agree).
SEED = random.Random(os.environ.get("PYTEST_XDIST_TESTRUNUID")).randrange(1 << 30)
# Every stage but the direct non-streaming load phase: one loop drives both direct phases (the
# streaming one, with streams open when the signal comes, stands for both).
LEFT_OUT = ("direct to the mock, nonstream",)
PHASES = Phases(direct_s=1.0, duration_s=2.0, warmup_s=1.0)
TABLE = bench_stages(PHASES)
STAGES = [i for i, (anchor, _) in enumerate(TABLE) if anchor not in LEFT_OUT]
# From a shell script, a SIGTERM 2 s into the proxy's non-streaming phase was once swallowed:
# the bench went on to the streaming phase.
SCRIPTED = Moment("proxy, nonstream phase", 2.0)


@pytest.fixture(scope="module", autouse=True)
def venv() -> None:
    litellm_python("1.103.0")  # built before the first moment is timed


@pytest.mark.parametrize("moment", [SCRIPTED, *moments(len(STAGES), SEED, STAGES, TABLE)], ids=str)
def test_a_sigterm_leaves_no_process_within_10_s(tmp_path: Path, moment: Moment) -> None:
    command = bench_command("1.103.0", tmp_path / "bench.json", PHASES)
    stop = stop_at(command, moment, tmp_path / "bench.log", cwd=tmp_path)
    # The last stage's window (the proxy's stop) is as long as it takes on a busy machine: a
    # moment past a quicker stop found the bench ended, so it is taken again, halfway.
    for _ in range(2):
        if stop.reached or stop.exit_code != 0 or moment.anchor != TABLE[-1][0]:
            break
        moment = Moment(moment.anchor, round(moment.offset_s / 2, 2))
        stop = stop_at(command, moment, tmp_path / "bench.log", cwd=tmp_path)
    assert stop.reached, f"the bench ended before {moment} (seed {SEED}):\n{stop.log_tail}"
    assert stop.clean_within(10.0), (
        f"seed {SEED}, {moment}: exit {stop.exit_code} after {stop.exit_s} s, clean after {stop.clean_s} s; "
        f"left: {stop.left}\n{stop.log_tail}"
    )
    if moment.anchor == "proxy, nonstream phase":
        assert "proxy, stream phase" not in stop.log_tail, f"the SIGTERM was not obeyed:\n{stop.log_tail}"
