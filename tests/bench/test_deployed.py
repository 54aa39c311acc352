"""perfkit bench --deployment: when the spend logs count as settled, what the
result and the report say, and the bad input it refuses (_bench/_deployed.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from litellm_perfkit._bench._deploy import Deployed, DeployError, _postgres
from litellm_perfkit._bench._deploy import preflight as deployment_preflight
from litellm_perfkit._bench._deployed import SETTLE_MAX_S, SETTLE_S, _settled, deployment_info
from litellm_perfkit._bench._experiment import preflight
from litellm_perfkit._bench._options import BenchError, BenchOptions


class Seconds:
    """A fake monotonic clock that sleeping advances."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_count_is_read_once_it_has_not_moved_for_the_settling_time() -> None:
    clock = Seconds()
    flushes = {103.0: 40, 110.0: 90}  # the batch writer's flushes: time -> rows by then

    def rows() -> int:
        return max((n for t, n in flushes.items() if clock.now >= t), default=0)

    assert _settled(rows, clock, clock.sleep) == 90
    assert clock.now == pytest.approx(110.0 + SETTLE_S)


def test_a_count_that_never_settles_is_read_at_the_limit() -> None:
    clock = Seconds()
    assert _settled(lambda: int(clock.now), clock, clock.sleep) == int(100.0 + SETTLE_MAX_S)


def test_a_plain_deployment_records_no_spend_logs_and_the_proxy_start() -> None:
    info = deployment_info(Deployed("plain"), 41.234)
    assert info == {
        "mode": "plain",
        "description": "plain: the proxy alone (master key, no database, no Redis)",
        "startup_s": {"proxy": 41.23},
        "spend_log_rows": None,
        "spend_log_successes": None,
        "answered": None,
    }


def test_a_database_deployment_says_which_query_engine_it_runs() -> None:
    deployed = Deployed("postgres", database_url="postgresql://x@127.0.0.1:1/litellm")
    assert "Prisma's WebAssembly query engine" in deployed.describe()
    assert "not Prisma's native engine" in deployed.describe()


@pytest.mark.parametrize(
    "options",
    [
        BenchOptions(deployment="postgres"),
        BenchOptions(deployment="postgres", litellm_versions=("1.103.0",), proxy_url="http://127.0.0.1:9"),
    ],
)
def test_a_deployment_needs_a_litellm_perfkit_installs(options: BenchOptions) -> None:
    with pytest.raises(BenchError, match="use it with --litellm-version"):
        preflight(options)


def test_the_cli_refuses_a_deployment_with_perturbation_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "bench", "--perturbation", "--deployment", "postgres"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--perturbation measures one plain proxy" in result.stderr


def test_a_missing_postgresql_is_named_with_its_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(_postgres, "DEBIAN_ROOT", tmp_path / "none")
    with pytest.raises(DeployError, match=r"apt-get install postgresql"):
        deployment_preflight("postgres")


def test_a_missing_redis_server_is_named_with_its_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for tool in ("initdb", "postgres", "psql", "node", "npm"):
        (tmp_path / tool).touch(mode=0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    deployment_preflight("postgres")  # everything it needs is there
    with pytest.raises(DeployError, match=r"needs redis-server: install it \(Debian: apt-get install redis-server\)"):
        deployment_preflight("postgres+redis")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (BenchOptions(instances=2, proxy_url="http://127.0.0.1:9"), "--instances starts LiteLLM proxies"),
        (BenchOptions(instances=2, driver="locust"), "drop --driver locust"),
        (
            BenchOptions(scenario="rate-limited-deployments", instances=2, litellm_versions=("1.103.0",)),
            "shares its rpm counters through Redis: add --deployment postgres\\+redis",
        ),
        (BenchOptions(scenario="rate-limited-deployments", config="my.yaml"), "--scenario sets the embedded config"),
    ],
)
def test_instances_and_scenarios_refuse_what_they_cannot_measure(options: BenchOptions, message: str) -> None:
    with pytest.raises(BenchError, match=message):
        preflight(options)
