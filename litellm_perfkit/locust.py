"""perfkit's Locust user: chat completions with TTFT, chunk gaps, overhead
headers and Server-Timing stages as Locust entries (docs/distributed.md).

    from litellm_perfkit.locust import ChatCompletionsUser

    class Chat(ChatCompletionsUser):
        pass

    # locust -f locustfile.py --host http://127.0.0.1:4000 --processes 4

Importing this module imports Locust (which monkey-patches the standard
library with gevent): import it from a locustfile only.
"""

from __future__ import annotations

from ._load._locust_user import OVERHEAD_HEADERS, ChatCompletionsUser

__all__ = ["ChatCompletionsUser", "OVERHEAD_HEADERS"]
