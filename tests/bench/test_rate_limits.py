"""--scenario rate-limited-deployments: the config, and whether the limits held (_bench/_rate_limits.py)."""

from __future__ import annotations

import calendar
import gzip

import orjson
import yaml

from litellm_perfkit._bench._deploy import Deployed
from litellm_perfkit._bench._options import MODEL, scenario_config
from litellm_perfkit._bench._rate_limits import rate_limits
from litellm_perfkit._bench._render import render_bench
from tests.docs.examples import ROOT

MINUTE = calendar.timegm((2026, 11, 26, 13, 20, 0, 0, 0, 0))


def test_the_requests_are_counted_by_the_utc_minute_they_were_sent_in() -> None:
    sends = [(MINUTE + 1.0, 200)] * 3 + [(MINUTE + 59.9, 429)] + [(MINUTE + 60.2, 200), (MINUTE + 61, None)]
    limits = rate_limits(sends, deployments=2, rpm=2, users=1)
    assert limits["minutes"] == [
        {"minute": "13:20", "ok": 3, "rate_limited": 1},
        {"minute": "13:21", "ok": 1, "rate_limited": 0},
    ]
    assert limits["held"]  # 3 is within 2 x 2 (+1 user in flight across the boundary)


def test_more_200s_in_a_minute_than_the_limits_and_the_users_allow_is_a_limit_exceeded() -> None:
    sends = [(MINUTE + i, 200) for i in range(6)]
    assert not rate_limits(sends, deployments=2, rpm=2, users=1)["held"]
    assert rate_limits(sends, deployments=2, rpm=2, users=2)["held"]


def test_the_scenario_has_two_rate_limited_deployments_of_the_model_counted_in_the_deployments_redis() -> None:
    template, router = scenario_config("rate-limited-deployments", "openai", 30)
    deployed = Deployed("postgres+redis", router_settings={"redis_host": "127.0.0.1", "redis_port": "6390"})
    config = yaml.safe_load(deployed.config(template.replace("{upstream}", "http://127.0.0.1:1"), router))
    models = [m for m in config["model_list"] if m["model_name"] == MODEL]
    assert [m["litellm_params"]["model"] for m in models] == ["openai/fake-1", "openai/fake-2"]
    assert [m["litellm_params"]["rpm"] for m in models] == [30, 30]
    assert config["router_settings"] == {
        "routing_strategy": "usage-based-routing-v2",
        "num_retries": 0,
        "redis_host": "127.0.0.1",
        "redis_port": 6390,
    }


def test_the_fake_endpoint_scenario_is_the_embedded_config() -> None:
    template, router = scenario_config("fake-endpoint", "openai", 30)
    assert router == {} and Deployed("plain").config(template, router) == template


def test_a_run_whose_every_request_was_refused_is_rendered() -> None:
    """Rate limits below the warm-ups' requests leave no successful request to time."""
    run = orjson.loads(gzip.decompress((ROOT / "tests/docs/runs/bench-1.103.0.json.gz").read_bytes()))
    run["nonstream"]["latency_ms"] = {"p50": None, "p95": None, "p99": None}
    assert "| latency | n/a (no successful request) |" in render_bench(run)
