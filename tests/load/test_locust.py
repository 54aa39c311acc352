"""perfkit's Locust user under a real headless Locust master with 2 workers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from litellm_perfkit._bench._launch import Children, free_port
from tests.support.documents import validate
from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LOCUST = Path(sys.executable).parent / "locust"
CHUNKS = 5
LABEL = "/v1/chat/completions (stream)"


def locust_distributed(
    host: str, workdir: Path, *entries: str, seconds: int = 8, users: int = 8
) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    """Run examples/locustfile.py with a master and 2 workers; (Locust's merged
    stats by (type, name), perfkit's merged result)."""
    assert LOCUST.exists(), f"locust is not installed beside the tests ({LOCUST}): pip install -e '.[test]'"
    port = free_port()
    locustfile = str(ROOT / "examples" / "locustfile.py")
    result = workdir / "perfkit-result.json"
    master_cmd = [
        str(LOCUST),
        "-f",
        locustfile,
        "--master",
        "--master-bind-host",
        "127.0.0.1",
        "--master-bind-port",
        str(port),
        "--expect-workers",
        "2",
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{seconds}s",
        "--host",
        host,
        "--json",
        "--perfkit-result",
        str(result),
        "--perfkit-entries",
        ",".join(entries),
        "OneThousandRps",
    ]
    worker_cmd = [str(LOCUST), "-f", locustfile, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
    with Children() as children:
        workers = [children.start(f"worker{i}", worker_cmd, cwd=workdir) for i in range(2)]
        master = subprocess.run(master_cmd, cwd=workdir, capture_output=True, timeout=seconds + 90)
        for worker in workers:
            worker.process.wait(30)
    assert master.returncode == 0, master.stderr.decode()[-3000:]
    stats = {(e["method"], e["name"]): e for e in orjson.loads(master.stdout)}
    perfkit = orjson.loads(result.read_bytes())
    validate(perfkit, "load")
    return stats, perfkit


def check_merged(stats: dict[tuple[str, str], dict[str, Any]], perfkit: dict[str, Any], entries: bool) -> int:
    main = stats[("POST", LABEL)]
    ok = main["num_requests"] - main["num_failures"]
    assert ok >= 20 and main["num_failures"] == 0
    if entries:
        assert stats[("TTFT", LABEL)]["num_requests"] == ok
        assert stats[("CHUNK_GAP", LABEL)]["num_requests"] == ok * (CHUNKS - 1)
    else:  # Locust's Aggregated row (the sum of its entries) counts HTTP requests
        assert sum(entry["num_requests"] for entry in stats.values()) == main["num_requests"], stats.keys()
    summary = perfkit["summary"]
    # both workers' histograms arrived and merged exactly
    assert summary["driver"]["processes"] == 2
    assert summary["ok"] == ok and summary["ttft_ms"]["count"] == ok and summary["itl_ms"]["count"] == ok * (CHUNKS - 1)
    assert perfkit["config"]["driver"] == "locust" and perfkit["config"]["stream"] is True
    return ok


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with mock_process("--ttft-ms", "20", "--itl-ms", "2", "--chunks", str(CHUNKS)) as url:
        yield url


@pytest.mark.quiet
def test_master_and_two_workers_against_the_mock(upstream: str, tmp_path: Path) -> None:
    stats, perfkit = locust_distributed(upstream, tmp_path)
    ok = check_merged(stats, perfkit, entries=False)
    ttft = perfkit["summary"]["ttft_ms"]
    assert 19.0 <= ttft["p50"] <= 30.0, ttft  # the mock's TTFT is 20 ms
    assert ok == perfkit["summary"]["requests"]


@pytest.mark.litellm
def test_master_and_two_workers_through_the_proxy(upstream: str, tmp_path: Path) -> None:
    with litellm_proxy("1.103.0", upstream, tmp_path, workers=1) as proxy:
        stats, perfkit = locust_distributed(proxy, tmp_path, "ttft", "chunk_gap", "overhead", "stage")
    ok = check_merged(stats, perfkit, entries=True)
    overhead = stats[("OVERHEAD", "x-perfkit-overhead-ms")]
    assert overhead["num_requests"] == ok
    assert perfkit["headers"]["x-perfkit-overhead-ms"]["count"] == ok
    stages = {name: entry["num_requests"] for (kind, name), entry in stats.items() if kind == "STAGE"}
    assert stages.get("auth") == ok, stages
    assert set(stages) == set(perfkit["server_timing"]), (stages, perfkit["server_timing"].keys())
    for name, count in stages.items():
        assert perfkit["server_timing"][name]["count"] == count


def test_a_subclass_task_and_the_mock_quota(tmp_path: Path) -> None:
    """RateLimitedDeployments overrides chat() (model "rate-limited"); against a
    mock allowing 10 requests a minute, exactly 10 succeed and the rest are 429s."""
    jsonl = tmp_path / "jsonl"
    with mock_process("--ttft-ms", "1", "--chunks", "3", "--rpm", "10") as upstream:
        command = [
            str(LOCUST),
            "-f",
            str(ROOT / "examples" / "locustfile.py"),
            "--headless",
            "-u",
            "6",
            "-r",
            "6",
            "-t",
            "8s",
            "--host",
            upstream,
            "--perfkit-result",
            str(tmp_path / "r.json"),
            "--perfkit-jsonl-dir",
            str(jsonl),
            "RateLimitedDeployments",
        ]
        locust = subprocess.run(command, cwd=tmp_path, capture_output=True, timeout=90)
    assert (tmp_path / "r.json").exists(), locust.stderr.decode()[-2000:]
    summary = orjson.loads((tmp_path / "r.json").read_bytes())["summary"]
    assert summary["ok"] == 10, summary
    assert set(summary["errors_by_class"]) == {"http_429"} and summary["errors_by_class"]["http_429"] >= 10
    records = [orjson.loads(line) for path in jsonl.glob("*.jsonl") for line in path.read_bytes().splitlines()]
    assert len(records) == summary["requests"] and {r["model"] for r in records} == {"rate-limited"}
