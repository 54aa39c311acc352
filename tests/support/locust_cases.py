"""A locustfile for tests/load/test_exchange.py: one request per case, then quit."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from litellm_perfkit.locust import ChatCompletionsUser


class Cases(ChatCompletionsUser):
    def chat(self) -> None:
        results = {}
        for case in os.environ["PERFKIT_TEST_CASES"].split(","):
            exchange = self.chat_completion(path=f"/{case}/v1/chat/completions", stream=True)
            results[case] = [exchange.error, len(exchange.token_times)]
        Path(os.environ["PERFKIT_TEST_OUT"]).write_bytes(orjson.dumps(results))
        self.environment.runner.quit()  # type: ignore[union-attr]
