"""perfkit run's health line: each process's counts at shutdown, summed over every process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._core._backend import ACTIVE
from litellm_perfkit._core._guard import internal_error_counts
from litellm_perfkit._export import Pipeline, read_settings
from litellm_perfkit._export._health import FIELDS, health_line
from litellm_perfkit._export._prometheus import render
from tests.export.test_pipeline import finished_timeline


def test_the_line_sums_every_processes_counts(tmp_path: Path) -> None:
    assert health_line(str(tmp_path)) is None  # nothing exported: no line
    (tmp_path / "1.health").write_bytes(
        orjson.dumps(
            dict(
                requests=10,
                recorded=8,
                exported_spans=40,
                dropped_spans=5,
                dropped_requests=1,
                internal_errors=0,
            )
        )
    )
    (tmp_path / "2.health").write_bytes(orjson.dumps(dict.fromkeys(FIELDS, 1)))
    (tmp_path / "3.json").write_bytes(b"{}")  # a metrics snapshot: not read
    assert health_line(str(tmp_path)) == (
        "perfkit run: requests 11, recorded 9, exported 41 spans, dropped 6 spans and 2 requests, internal errors 1"
    )


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_a_pipeline_writes_its_counts_when_it_shuts_down(tmp_path: Path, mode: str) -> None:
    settings = read_settings(
        {
            "OTEL_TRACES_EXPORTER": "jsonl",
            "PERFKIT_JSONL_PATH": str(tmp_path / "spans.jsonl"),
            "PERFKIT_PROMETHEUS_DIR": str(tmp_path),
        }
    )
    # The count is the process's: earlier tests in this process may have made some on purpose.
    errors_before = sum(internal_error_counts().values())
    ACTIVE.tally.clear()
    pipeline = Pipeline(settings, mode=mode).start()  # type: ignore[arg-type]
    for _ in range(3):
        pipeline.submit(finished_timeline())
    pipeline.shutdown()
    counts = orjson.loads((tmp_path / f"{os.getpid()}.health").read_bytes())
    # Submitted past the middleware: recorded but not in the tally, still counted as requests.
    assert counts["recorded"] == 3 and counts["requests"] == 3
    assert counts["exported_spans"] >= 3 and counts["dropped_spans"] == counts["dropped_requests"] == 0
    assert counts["internal_errors"] == errors_before  # this pipeline made none
    render(str(tmp_path))  # the Prometheus server reads the same directory: its snapshots only


def test_the_process_perfkit_run_became_prints_the_line_once_as_it_exits(tmp_path: Path) -> None:
    script = (
        "import litellm_perfkit, os\n"
        "from tests.export.test_pipeline import finished_timeline\n"
        "pipeline = litellm_perfkit.configure(exporter='none')\n"
        "pipeline.submit(finished_timeline())\n"
        "litellm_perfkit.shutdown()\n"
    )
    env = {
        **os.environ,
        "PERFKIT_RUN": "1",
        "PERFKIT_RUN_PID": "",  # filled in by the child itself below
        "PERFKIT_PROMETHEUS_DIR": str(tmp_path),
    }
    # The child is the process perfkit run became: PERFKIT_RUN_PID is its own pid.
    command = [sys.executable, "-c", "import os; os.environ['PERFKIT_RUN_PID'] = str(os.getpid())\n" + script]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("perfkit run: requests")]
    assert lines == [
        "perfkit run: requests 1, recorded 1, exported 0 spans, dropped 0 spans and 0 requests, internal errors 0"
    ], result.stderr[-2000:]
