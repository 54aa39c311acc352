"""A mock OpenAI-compatible provider with known, settable timing (docs/mock.md).

    from litellm_perfkit.mock import MockApp, MockConfig, ModelProfile
    app = MockApp(MockConfig(default=ModelProfile(ttft_ms=50, itl_ms=10)))   # ASGI, mountable

or run the fast standalone server: ``perfkit mock --ttft-ms 50 --itl-ms 10``.
"""

from __future__ import annotations

from ._mock import ConfigError, Deployment, MockApp, MockConfig, ModelProfile, load_config, serve, start_servers

__all__ = [
    "ConfigError",
    "Deployment",
    "MockApp",
    "MockConfig",
    "ModelProfile",
    "load_config",
    "serve",
    "start_servers",
]
