"""The mock OpenAI-compatible provider: engine, standalone server, ASGI app."""

from __future__ import annotations

from ._asgi import MockApp
from ._config import ConfigError, Deployment, Distribution, MockConfig, ModelProfile, load_config
from ._engine import MockEngine, Plan, Quota
from ._server import serve, start_servers

__all__ = [
    "ConfigError",
    "Deployment",
    "Distribution",
    "MockApp",
    "MockConfig",
    "MockEngine",
    "ModelProfile",
    "Plan",
    "Quota",
    "load_config",
    "serve",
    "start_servers",
]
