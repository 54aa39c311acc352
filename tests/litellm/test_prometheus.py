"""perfkit's metrics scraped as Prometheus does, from the real proxy with two workers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from litellm_perfkit._bench import CONFIG_TEMPLATE
from litellm_perfkit._bench._launch import free_port
from litellm_perfkit._wire._environment_variables import PERFKIT_PROMETHEUS_DIR
from tests.support.litellm_env import with_packages
from tests.support.mock_server import mock_process
from tests.support.procfs import environment
from tests.support.prometheus import metric_families, metrics_url, serving_metrics
from tests.support.proxy import litellm_proxy

pytestmark = [pytest.mark.integration, pytest.mark.litellm]


def auth_count(text: str) -> float:
    """The auth stage's _count, summed over its series."""
    total = 0.0
    for family in text_string_to_metric_families(text):  # every family of the name, LiteLLM's pages too
        if family.name == "perfkit_stage_duration_seconds":
            total += sum(
                s.value for s in family.samples if s.name.endswith("_count") and s.labels.get("stage") == "auth"
            )
    return total


def requests_by(families: dict[str, Any], label: str, route: str = "") -> dict[str, float]:
    """perfkit_requests_total summed by one of its labels (only routes containing ``route``)."""
    counts: dict[str, float] = {}
    family = families.get("perfkit_requests")
    for sample in family.samples if family is not None else ():
        if sample.name.endswith("_total") and route in sample.labels["http_route"]:
            counts[sample.labels[label]] = counts.get(sample.labels[label], 0) + sample.value
    return counts


@pytest.fixture
def upstream() -> Iterator[str]:
    with mock_process("--ttft-ms", "1", "--chunks", "3") as url:
        yield url


def chat(client: openai.OpenAI) -> None:
    client.chat.completions.create(model="fake-openai-endpoint", messages=[{"role": "user", "content": "hi"}])


def chat_each_on_its_own_connection(url: str, requests: int) -> None:
    """Fresh connections, so that each worker serves some."""
    for _ in range(requests):
        with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-1234", max_retries=0) as client:
            chat(client)


def scraped(page: str, enough: Callable[[str], bool], **get: Any) -> str:
    """The page, once ``enough`` holds of it (the workers' counts arrive after their
    answers), or as it is after 15 s."""
    deadline = time.monotonic() + 15
    while True:
        text = httpx.get(page, timeout=5, **get).text
        if enough(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.3)


def test_the_auth_stage_count_over_both_workers_is_the_request_count(tmp_path: Path, upstream: str) -> None:
    port, pids = free_port(), []
    args = serving_metrics(port)
    with litellm_proxy("1.103.0", upstream, tmp_path, workers=2, perfkit_args=args, pids=pids) as url:
        # perfkit run made a fresh snapshot directory for this proxy (PERFKIT_PROMETHEUS_DIR, in its environment).
        directory = Path(environment(pids[0], PERFKIT_PROMETHEUS_DIR) or "no snapshot directory")
        # Requests until both workers wrote their counts: which worker accepts a connection is the kernel's choice.
        requests = 0
        while requests < 20 or (len(list(directory.glob("*.json"))) < 2 and requests < 200):
            chat_each_on_its_own_connection(url, 10)
            requests += 10
            time.sleep(0 if requests < 20 else 1.2)  # a worker writes its counts within a second
        text = scraped(metrics_url(port), lambda page: auth_count(page) >= requests)
        missing = httpx.get(f"http://127.0.0.1:{port}/other", timeout=5)
        writers = sorted(p.name for p in directory.glob("*.json"))
    assert len(writers) >= 2, writers  # both workers' counts are in the sum
    assert auth_count(text) == requests, text[:3000]
    families = metric_families(text)
    assert families["perfkit_stage_duration_seconds"].type == "histogram"
    overhead = families["perfkit_request_overhead_seconds"]
    assert sum(s.value for s in overhead.samples if s.name.endswith("_count")) == requests
    assert "perfkit_requests_upstream_unmeasured" in families  # the counters, as Prometheus counters
    assert missing.status_code == 404
    assert "perfkit_time_to_first_token_seconds" not in families  # no stream was sent


def overhead_count(page: str) -> float:
    family = metric_families(page).get("perfkit_request_overhead_seconds")
    return 0.0 if family is None else sum(s.value for s in family.samples if s.name.endswith("_count"))


def test_by_default_a_busy_worker_records_ten_requests_a_second_and_counts_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream: str
) -> None:
    monkeypatch.delenv("PERFKIT_RECORD_RATE")  # perfkit run's default, as users get it
    port, requests = free_port(), 120

    def counted(page: str) -> dict[str, float]:
        return requests_by(metric_families(page), "perfkit_recorded", "/chat/completions")  # not the readiness checks

    args = serving_metrics(port)
    with litellm_proxy("1.103.0", upstream, tmp_path, perfkit_args=args) as url:
        with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-1234", max_retries=0) as client:
            started = time.monotonic()
            # Four at a time: one at a time passes ten a second only on a machine fast enough.
            with ThreadPoolExecutor(4) as senders:
                list(senders.map(lambda _: chat(client), range(requests - 2)))
            # After a pause, one request closes the load's window of arrivals; a second later the last
            # one's window holds that one alone, so its chance is one and the pace has refilled: it is
            # recorded, and its weight takes in every request passed by since the one before.
            time.sleep(1.1)
            chat(client)
            time.sleep(1.1)
            chat(client)
            elapsed = time.monotonic() - started
        # The records (the weighted families) come through the export agent, after the tally.
        text = scraped(
            metrics_url(port), lambda page: sum(counted(page).values()) >= requests and overhead_count(page) >= requests
        )
    recorded, unrecorded = counted(text).get("true", 0), counted(text).get("false", 0)
    overhead = overhead_count(text)
    assert recorded + unrecorded == requests
    # The sample's families are weighted: each record counts the requests it stands for.
    assert overhead == requests, (overhead, recorded)
    # At most twenty at once, then ten a second (the middleware's clock starts a little before this one's).
    assert 10 <= recorded <= 20 + 10 * elapsed + 1, (recorded, elapsed)
    assert unrecorded > 0, f"{requests} requests in {elapsed:.1f} s should exceed ten a second"


@pytest.mark.parametrize(("version", "workers"), [("1.83.14", 1), ("1.103.0", 2)])
def test_perfkits_families_in_litellms_own_metrics(tmp_path: Path, upstream: str, version: str, workers: int) -> None:
    """LiteLLM's prometheus callback serves /metrics (its default registry with 1 worker, its
    multiprocess collector with 2): perfkit's families are there too, summed over the workers."""
    with_packages(version, {"prometheus_client": "prometheus_client"})
    config = CONFIG_TEMPLATE.replace(
        "general_settings:", 'litellm_settings:\n  callbacks: ["prometheus"]\ngeneral_settings:'
    )
    requests = 20
    args = ("--exporter", "none")
    with litellm_proxy(version, upstream, tmp_path, workers=workers, perfkit_args=args, config=config) as url:
        chat_each_on_its_own_connection(url, requests)
        text = scraped(
            f"{url}/metrics/",
            lambda page: auth_count(page) >= requests,
            headers={"authorization": "Bearer sk-1234"},
            follow_redirects=True,
        )
    names = set(metric_families(text))
    assert auth_count(text) == requests, sorted(names)
    assert any(name.startswith("litellm_") for name in names), sorted(names)  # LiteLLM's own are still there
