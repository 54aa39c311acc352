"""perfkit bench's working files on a full disk: its temporary directory (the
load phases' per-request records) on a small tmpfs that fills up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from litellm_perfkit._bench._launch import Children, start_mock
from tests.support.descendants import started_processes
from tests.support.fault_matrix import app_process
from tests.support.otlp_faults import faulty_receiver

ROOT = Path(__file__).resolve().parents[2]
# A private mount namespace (root: the test machine's user) with a 256 KiB tmpfs as TMPDIR,
# filled to 16 KiB of room: Python's tempfile takes it (its test write fits) and the bench's
# first phase fills it. The mount ends with the bench.
FULL_TMPDIR = (
    'mount -t tmpfs -o size=256k perfkit-full "$1" && '
    'dd if=/dev/zero of="$1/fill" bs=4k count=60 status=none && '
    'shift && TMPDIR="$0" exec "$@"'
)


@pytest.mark.integration
def test_a_full_disk_under_the_bench_says_so_in_one_line_and_the_gateway_keeps_serving(tmp_path: Path) -> None:
    full = tmp_path / "tmp"
    full.mkdir()
    with (
        Children() as children,
        faulty_receiver("ok") as receiver,
        app_process(start_mock(children), tmp_path, receiver.url) as (gateway, port),
    ):
        url = f"http://127.0.0.1:{port}"
        bench = [sys.executable, "-m", "litellm_perfkit._cli", "bench", "--proxy-url", url, "--duration", "2"]
        bench += ["--direct-duration", "1", "--warmup", "10r", "--idle", "0", "--progress", "off"]
        bench += ["--out", str(tmp_path / "bench.json")]
        with started_processes() as started:
            done = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", FULL_TMPDIR, str(full), str(full)]
                + bench,
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=300,
            )
        answer = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": []}, timeout=30)
        gateway_alive = gateway.died() is None
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(errors) == 1 and errors[0].startswith("perfkit bench: error: cannot write "), done.stderr
    assert errors[0].endswith(": No space left on device") and str(full) in errors[0], done.stderr
    assert not (tmp_path / "bench.json").exists()
    # The bench's mock was started, and nothing it started is left (the gateway's own export
    # agent, started at its first request, is the gateway's); the gateway served on.
    assert any(" mock " in p.command for p in started.seen.values()), started.seen
    assert [p for p in started.alive if p.session != gateway.process.pid] == [], started.alive
    assert answer.status_code == 200 and gateway_alive
