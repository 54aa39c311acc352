"""The suite's runner (tests/__main__.py): both parts run, whatever the first's outcome,
and the status is the first failure's; a SIGTERM stops the running part and runs no other."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import __main__ as runner

ROOT = Path(__file__).resolve().parents[1]


class FakePart:
    """A part that ends at once with the next status of ``codes``; the parts' arguments in ``ran``."""

    def __init__(self, codes: list[int], ran: list[list[str]]) -> None:
        self.codes, self.ran = codes, ran

    def __call__(self, command: list[str], **kwargs: Any) -> FakePart:
        self.ran.append(command[3:])
        self.code = self.codes.pop(0)
        return self

    def wait(self) -> int:
        return self.code


@pytest.mark.parametrize(("codes", "status"), [([0, 0], 0), ([1, 0], 1), ([0, 1], 1), ([1, 2], 1)])
def test_both_parts_run_and_the_first_failure_is_the_status(
    monkeypatch: pytest.MonkeyPatch, codes: list[int], status: int
) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(subprocess, "Popen", FakePart(codes, ran))
    assert runner.run(["-x"]) == status
    assert ran == [["-n", "3", "-m", "not quiet", "-x"], ["-m", "quiet", "-x"]]


def test_a_sigterm_stops_the_running_part_and_runs_no_other(tmp_path: Path) -> None:
    # The parts are a pytest run of one test that sleeps, then notes it was not stopped.
    sleeper = tmp_path / "test_sleeper.py"
    sleeper.write_text(
        "import pathlib, time\n"
        "def test_sleeps():\n"
        f"    open({str(tmp_path / 'started')!r}, 'a').write('part\\n')\n"
        "    time.sleep(30)\n"
        f"    pathlib.Path({str(tmp_path / 'not stopped')!r}).touch()\n"
    )
    code = (
        "import sys; from tests import __main__ as r; r.PARTS = (('-p', 'no:cacheprovider'),) * 2; "
        f"sys.exit(r.run([{str(sleeper)!r}, '-q', '-p', 'no:randomly', '-o', 'addopts=']))"
    )
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and process.poll() is None, "the first part never started"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    time.sleep(0.5)
    assert not (tmp_path / "not stopped").exists()
    assert (tmp_path / "started").read_text() == "part\n"  # the second part never started


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run's last line is the command under the README's "Run every test", byte for byte."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("**Run every test**", 1)[1].split("```bash\n", 1)[1].split("\n```", 1)[0]
    ci = (ROOT / ".ci" / "run").read_text().rstrip("\n").splitlines()
    assert block.splitlines() == [ci[-1]], (block, ci[-1])
    assert block.endswith("python -m tests")
