"""``perfkit bench --deployment``: a target measured in the deployment users
run. The parts start before its proxy and stop after it; with a database the
load authenticates with a virtual key the proxy generated (``/key/generate``,
with the master key), so every request pays the key's lookup and its budget
and limit checks, and LiteLLM's own spend logger records it: spend tracking
is on, as in production. The result says what ran and what the database recorded."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator

from ..types import BenchDeploymentInfo
from ._deploy import Deployed, DeployError, deployment, generate_key, spend_log_rows
from ._options import MASTER_KEY, BenchError, BenchOptions
from ._venvs import VenvError, litellm_python

__all__ = ["SETTLE_S", "deployment_info", "target_deployment", "with_virtual_key"]

SETTLE_S = 12.0
"""The spend logs are settled when their count has not moved for this long:
LiteLLM's batch writer flushes every ``proxy_batch_write_at`` seconds (10 by default)."""
SETTLE_MAX_S = 60.0


@contextlib.contextmanager
def target_deployment(options: BenchOptions, version: str | None) -> Iterator[Deployed]:
    """``options.deployment``'s parts for ``version``'s proxy, for the block."""
    try:
        python = litellm_python(version, options.say) if version and options.deployment != "plain" else None
        with deployment(options.deployment, python, options.say) as deployed:
            yield deployed
    except (DeployError, VenvError) as exc:
        raise BenchError(str(exc)) from None


def with_virtual_key(options: BenchOptions, url: str, deployed: Deployed) -> BenchOptions:
    """The options the load runs with: with a database, the master key and a
    new virtual key, interleaved request by request (``_by_key``)."""
    if deployed.database_url is None:
        return options
    master = options.api_key or MASTER_KEY
    key = generate_key(url, master)
    options.say(
        "the load alternates the master key and a virtual key (/key/generate) request by request; LiteLLM tracks the spend of both"
    )
    return dataclasses.replace(options, api_key=key, api_keys=(master, key))


def _settled(read: Callable[[], int], clock: Callable[[], float], sleep: Callable[[float], None]) -> int:
    """``read()`` once it has not changed for ``SETTLE_S`` (at most ``SETTLE_MAX_S``)."""
    started = changed = clock()
    value = read()
    while clock() - changed < SETTLE_S and clock() - started < SETTLE_MAX_S:
        sleep(1.0)
        now = read()
        if now != value:
            value, changed = now, clock()
    return value


def deployment_info(
    deployed: Deployed,
    proxy_start_s: float | None,
    answered: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> BenchDeploymentInfo:
    """What ran and what it recorded; with a database, once its spend logs
    settled (the proxies still up), beside the chat requests the proxies
    ``answered`` 200 (perfkit's tally)."""
    rows = successes = None
    if deployed.database_url is not None:
        url = deployed.database_url
        rows = _settled(lambda: spend_log_rows(url), clock, sleep)
        successes = spend_log_rows(url, status="success")
    startup = {**deployed.startup_s, **({"proxy": proxy_start_s} if proxy_start_s is not None else {})}
    return {
        "mode": deployed.mode,
        "description": deployed.describe(),
        "startup_s": {name: round(seconds, 2) for name, seconds in startup.items()},
        "spend_log_rows": rows,
        "spend_log_successes": successes,
        "answered": answered if deployed.database_url is not None else None,
    }
