"""Mock provider settings: timing, size, faults and quotas, per run and per model."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from ..types import Distribution

__all__ = ["Distribution", "ModelProfile", "Deployment", "MockConfig", "load_config", "ConfigError"]


class ConfigError(ValueError):
    """A bad mock setting; the message says what and how to fix it."""


@dataclass(frozen=True)
class ModelProfile:
    """How responses look and when they arrive. Times in milliseconds.

    The first content chunk is sent ``ttft_ms`` after the request arrived; each
    later chunk ``itl_ms`` after the one before. Non-streaming responses are
    sent after ``ttft_ms + (chunks - 1) * itl_ms``, when the last token would be.
    """

    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    distribution: Distribution = "fixed"  # how ttft/itl are drawn around their mean
    spread_ms: float = 0.0  # uniform: half-width; normal/lognormal: standard deviation
    jitter_ms: float = 0.0  # extra uniform noise in [0, jitter_ms) on every delay
    chunks: int = 20  # content chunks per response
    tokens_per_chunk: int = 1
    token_text: str = "tok"
    embedding_dims: int = 8
    error_500_fraction: float = 0.0
    error_429_fraction: float = 0.0
    retry_after_s: int = 1
    timeout_fraction: float = 0.0  # never answer (until hang_s), as a stuck upstream
    hang_s: float = 600.0
    disconnect_fraction: float = 0.0  # close the connection mid-stream (or before the body)
    malformed_fraction: float = 0.0  # one SSE event whose data is cut JSON (a JSON answer: the body cut)

    def validate(self) -> ModelProfile:
        if self.distribution not in get_args(Distribution):
            raise ConfigError(f"distribution {self.distribution!r}: use one of {', '.join(get_args(Distribution))}")
        for name in ("ttft_ms", "itl_ms", "spread_ms", "jitter_ms", "hang_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.chunks < 1 or self.tokens_per_chunk < 1:
            raise ConfigError("chunks and tokens_per_chunk must be at least 1")
        faults = [
            self.error_500_fraction,
            self.error_429_fraction,
            self.timeout_fraction,
            self.disconnect_fraction,
            self.malformed_fraction,
        ]
        if any(not 0 <= f <= 1 for f in faults) or sum(faults) > 1:
            raise ConfigError("fault fractions are from 0 to 1 and add up to at most 1")
        return self

    def draw(self, mean_ms: float, rng: random.Random | None) -> float:
        """One delay in ms, drawn per the distribution (never negative)."""
        if rng is None:
            return mean_ms
        value = mean_ms
        if self.distribution == "uniform":
            value = rng.uniform(mean_ms - self.spread_ms, mean_ms + self.spread_ms)
        elif self.distribution == "normal":
            value = rng.gauss(mean_ms, self.spread_ms)
        elif self.distribution == "exponential":
            value = rng.expovariate(1 / mean_ms) if mean_ms > 0 else 0.0
        elif self.distribution == "lognormal" and mean_ms > 0:
            # mean and standard deviation of the delay itself, not of its log
            variance = math.log(1 + (self.spread_ms / mean_ms) ** 2)
            value = rng.lognormvariate(math.log(mean_ms) - variance / 2, math.sqrt(variance))
        if self.jitter_ms:
            value += rng.uniform(0, self.jitter_ms)
        return max(0.0, value)

    @property
    def needs_draws(self) -> bool:
        """Whether any draw is needed (a fixed, fault-free profile needs none)."""
        return bool(
            self.distribution != "fixed"
            or self.jitter_ms
            or self.error_500_fraction
            or self.error_429_fraction
            or self.timeout_fraction
            or self.disconnect_fraction
            or self.malformed_fraction
        )


@dataclass(frozen=True)
class Deployment:
    """One listening port with its own quota (the 'two deployments' test)."""

    name: str
    port: int
    rpm: int = 0  # requests per minute, 0 = unlimited
    tpm: int = 0  # tokens (prompt + completion) per minute, 0 = unlimited


@dataclass(frozen=True)
class MockConfig:
    host: str = "127.0.0.1"
    default: ModelProfile = field(default_factory=ModelProfile)
    models: dict[str, ModelProfile] = field(default_factory=dict)
    deployments: tuple[Deployment, ...] = (Deployment("default", 8000),)
    seed: int | None = None

    def profile(self, model: str) -> ModelProfile:
        return self.models.get(model, self.default)


_PROFILE_FIELDS = {f.name for f in dataclasses.fields(ModelProfile)}


def _profile(base: ModelProfile, values: dict[str, Any], where: str) -> ModelProfile:
    unknown = set(values) - _PROFILE_FIELDS
    if unknown:
        raise ConfigError(
            f"{where}: unknown setting(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_PROFILE_FIELDS))}"
        )
    try:
        return dataclasses.replace(base, **values).validate()
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_config(path: str | None, base: MockConfig) -> MockConfig:
    """Merge a JSON or YAML file into ``base``:

    ``{"default": {...}, "models": {"name": {...}}, "deployments": [{"name", "port", "rpm", "tpm"}], "seed": 1}``
    """
    if path is None:
        return base
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read mock config {path}: {exc.strerror}") from None
    try:
        if file.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
    except ImportError:
        raise ConfigError("YAML mock configs need PyYAML: pip install 'litellm_perfkit[cli]', or use JSON") from None
    except Exception as exc:
        raise ConfigError(f"{path} is not valid {file.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    default = _profile(base.default, data.get("default", {}), f"{path}: default")
    models = {
        name: _profile(default, values, f"{path}: model {name}") for name, values in data.get("models", {}).items()
    }
    deployments = base.deployments
    if "deployments" in data:
        try:
            deployments = tuple(Deployment(**d) for d in data["deployments"])
        except TypeError as exc:
            raise ConfigError(f"{path}: deployments: {exc}") from None
    return dataclasses.replace(
        base, default=default, models=models, deployments=deployments, seed=data.get("seed", base.seed)
    )
