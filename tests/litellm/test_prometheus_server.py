"""A real Prometheus server (Debian's) scrapes perfkit's endpoint on the real
proxy under load past the record rate: PromQL over perfkit's request families
gives the load driver's request rate, p50 and p95, though most requests were
not recorded.

The proxy runs at a record rate of 2 a second per worker, not the default 10:
three times the default's combined cap (60 requests a second over 2 workers)
saturates LiteLLM on this 2-core machine, and a saturated proxy's requests
wait before the middleware sees them (docs/telemetry.md), which no
server-side histogram can match to the client's. 14 a second is 3.5 times
the cap here, and leaves the proxy its headroom."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from bisect import bisect_left
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._bench._launch import free_port
from litellm_perfkit._core._layouts import BOUNDARIES_NS
from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy
from tests.support.servers import prometheus_process

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

RATE, SECONDS, WINDOW_S = 14, 40, 30
CHAT = 'http_route=~".*/chat/completions"'


def test_promql_over_perfkits_request_families_gives_the_drivers_rate_p50_and_p95(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFKIT_RECORD_RATE", "2")
    port = free_port()
    driver = [sys.executable, "-m", "litellm_perfkit._cli", "load", "--prompt-repeats", "5", "--progress", "off"]
    # Unsampled: a sampled traceparent is recorded past the cap, and this load means to pass it.
    load = [*driver, "--traceparent", "unsampled", "--duration", f"{SECONDS}s", "--rate", str(RATE)]
    with (
        mock_process("--ttft-ms", "150", "--chunks", "3") as upstream,
        litellm_proxy(
            "1.103.0",
            upstream,
            tmp_path,
            workers=2,
            perfkit_args=("--exporter", "none", "--prometheus-port", str(port)),
        ) as url,
        prometheus_process(tmp_path, "perfkit", [f"127.0.0.1:{port}"]) as prometheus,
    ):
        warm = subprocess.run([*driver, "--duration", "5s", "--rate", "5", "--url", url], capture_output=True)
        assert warm.returncode == 0, warm.stderr[-2000:]
        out = tmp_path / "load.jsonl"
        run = subprocess.run([*load, "--url", url, "--out", str(out)], capture_output=True, text=True)
        ended = time.time()
        assert run.returncode == 0, run.stderr[-2000:]
        time.sleep(2)  # a scrape after the last request
        at = ended - 3  # the window ends inside the load: [ended - 33 s, ended - 3 s]
        rate = prometheus.query(f"sum(rate(perfkit_requests_total{{{CHAT}}}[{WINDOW_S}s]))", at)
        quantiles = {
            q: prometheus.query(
                f"histogram_quantile({q}, sum by (le) (rate(perfkit_request_duration_seconds_bucket"
                f'{{{CHAT},http_response_status_code="200"}}[{WINDOW_S}s])))',
                at,
            )
            for q in (0.5, 0.95)
        }
        recorded = prometheus.query(f"sum by (perfkit_recorded) (increase(perfkit_requests_total{{{CHAT}}}[1h]))")
    lines = [orjson.loads(line) for line in out.open()]
    assert len(lines) >= 0.95 * RATE * SECONDS and all(line["status"] == 200 for line in lines)
    # The driver's rate: an even arrival at RATE, each request answered (it kept up).
    driver_rate = len(lines) / SECONDS
    promql_rate = float(rate[0]["value"][1])
    assert abs(promql_rate - driver_rate) <= 0.02 * driver_rate, (promql_rate, driver_rate)
    # The quantiles of what the client saw, from when each request was sent; perfkit's start when the proxy
    # had it. histogram_quantile interpolates inside a bucket: the driver's must be in that bucket.
    latencies_ns = sorted((line["end_ms"] - line["sent_ms"]) * 1e6 for line in lines)
    for q, found in quantiles.items():
        driver_q = latencies_ns[int(q * len(latencies_ns))]
        promql_q = float(found[0]["value"][1]) * 1e9
        bucket = bisect_left(BOUNDARIES_NS, promql_q)
        low, high = BOUNDARIES_NS[bucket - 1], BOUNDARIES_NS[bucket]
        assert low - 3e6 <= driver_q <= high, (q, driver_q / 1e6, promql_q / 1e6, low / 1e6, high / 1e6)
    # Most requests were only counted: the families above are of all traffic, not of the sample.
    by_recorded = {r["metric"]["perfkit_recorded"]: float(r["value"][1]) for r in recorded}
    assert 0 < by_recorded["true"] < by_recorded["false"], by_recorded
    assert statistics.median(latencies_ns) < 1e9  # the proxy was not saturated
