"""The locustfile ``perfkit bench --driver locust`` runs: perfkit's user, as configured by --perfkit-* options."""

from __future__ import annotations

from litellm_perfkit.locust import ChatCompletionsUser


class PerfkitChat(ChatCompletionsUser):
    pass
