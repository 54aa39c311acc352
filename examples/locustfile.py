"""LiteLLM's two published Locust load tests, against perfkit's mock provider.

Streaming is on (``--perfkit-stream off`` turns it off). perfkit's table at
the end has TTFT, chunk gaps, the overhead headers and every Server-Timing
stage; ``--perfkit-entries ttft,overhead,stage`` adds them to Locust's own
table too. Pick the test by its class name.

1K RPS (LiteLLM docs: "1K RPS Load test on locust"; 1,000 users who wait
0.5-1 s between requests)::

    perfkit mock --config examples/mock_locust.yaml &
    perfkit run -- litellm --config examples/proxy_config.yaml --port 4000 --num_workers 2 &
    locust -f examples/locustfile.py --host http://127.0.0.1:4000 --headless \
        -u 1000 -r 1000 -t 60s --processes 4 OneThousandRps

Rate-limited deployments (two deployments of ``rate-limited``, 10K RPM each:
expect about 20,000 successes a minute and 429s for the rest)::

    locust -f examples/locustfile.py --host http://127.0.0.1:4000 --headless \
        -u 1000 -r 1000 -t 60s --processes 4 RateLimitedDeployments

Across hosts: ``--master`` here, ``--worker --master-host HOST`` on each load
machine (docs/distributed.md). ``--perfkit-result run.json`` writes the
merged perfkit.load/1 document (exact percentiles from every worker).
"""

from __future__ import annotations

from locust import between

from litellm_perfkit.locust import ChatCompletionsUser


class OneThousandRps(ChatCompletionsUser):
    wait_time = between(0.5, 1)

    def chat(self) -> None:
        self.chat_completion(model="fake-openai-endpoint")


class RateLimitedDeployments(ChatCompletionsUser):
    wait_time = between(0.5, 1)

    def chat(self) -> None:
        self.chat_completion(model="rate-limited")
