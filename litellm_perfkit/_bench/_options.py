"""What a bench is asked to do, and how it fails."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from .._load import Driver

__all__ = ["BenchError", "BenchOptions", "CONFIG_TEMPLATE", "MODEL"]

MODEL = "fake-openai-endpoint"
CONFIG_TEMPLATE = """\
model_list:
  - model_name: fake-openai-endpoint
    litellm_params:
      model: openai/fake
      api_base: {upstream}/v1
      api_key: fake-key
  - model_name: fake-embedding
    litellm_params:
      model: openai/fake-embedding
      api_base: {upstream}/v1
      api_key: fake-key
general_settings:
  master_key: sk-1234
"""


class BenchError(RuntimeError):
    """A bench that cannot run; the message says why and what to do."""


@dataclass(frozen=True)
class BenchOptions:
    litellm_versions: tuple[str, ...] = ()  # empty: the LiteLLM installed beside perfkit
    proxy_command: str | None = None  # with {port} and {upstream}
    proxy_url: str | None = None
    config: str | None = None  # a LiteLLM config; {upstream} is replaced
    workers: tuple[int, ...] = (1,)
    concurrency: int = 20
    stream_concurrency: int = 10
    duration_s: float = 20.0
    direct_duration_s: float = 10.0
    warmup_s: float = 5.0
    warmup_requests: int = 0  # instead of warmup_s when set
    repeats: int = 1
    prompt_repeats: int = 150
    ttft_ms: float = 20.0
    itl_ms: float = 2.0
    chunks: int = 20
    label: str = "bench"
    driver: Driver = "perfkit"
    processes: int = 1  # load-driver processes
    flamegraph: Literal["off", "speedscope", "svg"] = "off"  # py-spy on the proxy during the first repeat
    flamegraph_prefix: str = "perfkit-bench"  # files: PREFIX.TARGET.wN.speedscope.json / .svg
    progress: Literal["auto", "on", "off"] = "auto"
    log: Any = field(default=sys.stderr, repr=False, compare=False)

    def say(self, message: str) -> None:
        print(f"perfkit bench: {message}", file=self.log, flush=True)
