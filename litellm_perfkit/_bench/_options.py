"""What a bench is asked to do, and how it fails."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from .._wire._record_rate import DEFAULT_RECORD_RATE
from ..types import BenchDeployment, BenchFlamegraph, BenchHeadline, BenchScenario, Driver, ProgressMode

__all__ = [
    "BenchError",
    "BenchOptions",
    "CANNOT_STREAM",
    "CONFIG_TEMPLATE",
    "MASTER_KEY",
    "MODEL",
    "PERTURBATION_PAIRS",
    "PROVIDERS",
    "config_template",
    "model_entry",
    "scenario_config",
]

MODEL = "fake-openai-endpoint"
MASTER_KEY = "sk-1234"
"""The embedded config's model and master key: what the bench sends unless told."""
# How the embedded config reaches the mock through each provider path
# (``--provider``): LiteLLM's params after ``model:``, {upstream} the mock's
# URL. They take different code paths in LiteLLM: the OpenAI SDK (openai,
# azure through AzureOpenAI), LiteLLM's own httpx handlers (anthropic,
# hosted_vllm) and its aiohttp handler (aiohttp_openai).
PROVIDERS: dict[str, str] = {
    "openai": "openai/fake\n      api_base: {upstream}/v1",
    "azure": 'azure/fake\n      api_base: {upstream}\n      api_version: "2024-10-21"',
    "anthropic": "anthropic/fake\n      api_base: {upstream}",
    "hosted_vllm": "hosted_vllm/fake\n      api_base: {upstream}/v1",
    "aiohttp_openai": "aiohttp_openai/fake\n      api_base: {upstream}/v1",
}
# LiteLLM's aiohttp_openai handler reads every answer as JSON: it cannot stream.
CANNOT_STREAM = frozenset({"aiohttp_openai"})


def model_entry(name: str, provider: str) -> str:
    """One ``model_list`` entry: ``name`` served through ``provider``."""
    return f"  - model_name: {name}\n    litellm_params:\n      model: {PROVIDERS[provider]}\n      api_key: fake-key\n"


def config_template(provider: str = "openai") -> str:
    """The embedded LiteLLM config: the bench's model through ``provider``, an
    embedding model, and a master key; {upstream} is the mock's URL."""
    return (
        "model_list:\n"
        + model_entry(MODEL, provider)
        + "  - model_name: fake-embedding\n    litellm_params:\n      model: openai/fake-embedding\n"
        "      api_base: {upstream}/v1\n      api_key: fake-key\n"
        f"general_settings:\n  master_key: {MASTER_KEY}\n"
    )


CONFIG_TEMPLATE = config_template()

RATE_LIMITED_DEPLOYMENTS = 2


def scenario_config(scenario: BenchScenario, provider: str, rpm: int) -> tuple[str, dict[str, str]]:
    """(the config's template, its router settings) for ``scenario``.
    ``rate-limited-deployments`` is the 1K-RPS guide's: two deployments of the
    bench's model, each with an rpm limit that the router enforces
    (usage-based-routing-v2 counts each deployment's requests per minute, in
    Redis when the proxy has one), no retries: a request over both limits is
    answered 429 at once. The deployments differ by model name only (their ids
    must differ); both reach the mock."""
    if scenario == "fake-endpoint":
        return config_template(provider), {}
    deployments = "".join(
        model_entry(MODEL, provider).replace("/fake\n", f"/fake-{n}\n", 1) + f"      rpm: {rpm}\n"
        for n in range(1, RATE_LIMITED_DEPLOYMENTS + 1)
    )
    template = config_template(provider).replace(model_entry(MODEL, provider), deployments, 1)
    return template, {"routing_strategy": "usage-based-routing-v2", "num_retries": "0"}


PERTURBATION_PAIRS = 8
"""Interleaved pairs --perturbation runs unless told (--repeats)."""


class BenchError(RuntimeError):
    """A bench that cannot run; the message says why and what to do."""


@dataclass(frozen=True)
class BenchOptions:
    litellm_versions: tuple[str, ...] = ()  # empty: the LiteLLM installed beside perfkit
    proxy_command: str | None = None  # with {port} and {upstream}
    proxy_env: tuple[tuple[str, str], ...] = ()  # added to the proxy command's environment (PYTHONPATH is prepended)
    proxy_url: str | None = None
    config: str | None = None  # a LiteLLM config; {upstream} is replaced
    model: str = MODEL  # the model the load asks for
    api_key: str | None = field(default=MASTER_KEY, repr=False)  # sent as Authorization: Bearer; never recorded
    # With a database: the master key and a virtual key, interleaved request by request (_by_key.py).
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    provider: str = "openai"  # the embedded config's path to the mock (PROVIDERS)
    workers: tuple[int, ...] = (1,)
    instances: int = 1  # proxies sharing the deployment's database and Redis, the load spread over them
    scenario: BenchScenario = "fake-endpoint"
    rpm: int = 120  # per deployment, with scenario rate-limited-deployments
    concurrency: int = 20
    stream_concurrency: int = 10
    duration_s: float = 20.0
    direct_duration_s: float = 10.0
    warmup_s: float = 5.0
    warmup_requests: int = 0  # instead of warmup_s when set
    repeats: int = 1
    idle_s: float = 5.0  # one user after the repeats (0: skip)
    prompt_repeats: int = 150
    ttft_ms: float = 20.0
    itl_ms: float = 2.0
    chunks: int = 20
    label: str = "bench"
    driver: Driver = "perfkit"
    processes: int = 1  # load-driver processes
    deployment: BenchDeployment = "plain"  # what runs beside the proxy (_deployed.py)
    flamegraph: BenchFlamegraph = "off"  # py-spy on the proxy during the first repeat
    flamegraph_prefix: str = "perfkit-bench"  # files: PREFIX.TARGET.wN.speedscope.json / .svg
    progress: ProgressMode = "auto"
    headline: BenchHeadline = "plain"  # RPS, latency and proxy CPU from a proxy perfkit does not touch (_headline.py)
    # perfkit run's --record-rate for the instrumented proxy of --perturbation
    # (what users run); the bench itself records every request to attribute them.
    record_rate: str = f"{DEFAULT_RECORD_RATE:g}"
    log: Any = field(default=sys.stderr, repr=False, compare=False)

    def recorded(self) -> dict[str, Any]:
        """The options as a result document records them: not the log, the progress bars or the key."""
        return {k: v for k, v in self.__dict__.items() if k not in ("log", "progress", "api_key", "api_keys")}

    def mock_flags(self) -> tuple[str, ...]:
        """``perfkit mock``'s flags for the upstream latency these options ask for."""
        return ("--ttft-ms", str(self.ttft_ms), "--itl-ms", str(self.itl_ms), "--chunks", str(self.chunks))

    def say(self, message: str) -> None:
        print(f"perfkit bench: {message}", file=self.log, flush=True)
