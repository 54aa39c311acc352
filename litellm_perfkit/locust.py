"""perfkit's Locust user for model APIs, with perfkit's exact histograms
merged across workers, and TTFT, chunk gaps, overhead headers and
Server-Timing stages as opt-in Locust entries (docs/distributed.md).

    from litellm_perfkit.locust import ChatCompletionsUser

    class Chat(ChatCompletionsUser):
        pass

    # locust -f locustfile.py --host http://127.0.0.1:4000 --processes 4 --perfkit-entries ttft

Importing this module imports Locust (which monkey-patches the standard
library with gevent): import it from a locustfile only.
"""

from __future__ import annotations

# Locust's import monkey-patches the standard library with gevent; it must come
# before the load package, whose asyncio imports ssl on CPython 3.10 (ssl
# imported before the patch recurses forever in urllib3).
import locust  # noqa: F401  isort: skip

from ._load._locust_user import ChatCompletionsUser
from ._wire._names import OVERHEAD_HEADERS

__all__ = ["ChatCompletionsUser", "OVERHEAD_HEADERS"]
