"""The locustfile ``perfkit bench --driver locust`` runs: perfkit's user, as configured by --perfkit-* options.

Locust runs it by path, once it has imported itself (so the public
``litellm_perfkit.locust``'s import order is already met here)."""

from __future__ import annotations

from litellm_perfkit._load._locust_user import ChatCompletionsUser


class PerfkitChat(ChatCompletionsUser):
    pass
