"""Continuous profiling with pyroscope-io, tagged with what perfkit knows.

Only static tags: pyroscope's ``tag_wrapper`` tags a *thread*, and under
asyncio every request shares one thread, so a per-request or per-stage tag
would label whatever other request runs next. Per-stage profiles come from
``StageProfiler`` instead (docs/profiling.md).
"""

from __future__ import annotations

import importlib.metadata
import os
import socket

from .._version import __version__

__all__ = ["perfkit_tags", "start_pyroscope"]


def perfkit_tags(service: str) -> dict[str, str]:
    tags = {
        "service_name": service,
        "perfkit_version": __version__,
        "host": socket.gethostname(),
        "pid": str(os.getpid()),
    }
    try:
        tags["litellm_version"] = importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        pass
    return tags


def start_pyroscope(
    server_address: str, service: str, sample_rate: int = 100, extra_tags: dict[str, str] | None = None
) -> dict[str, str]:
    """Start pyroscope-io's sampler in this process; returns the tags it carries."""
    import pyroscope

    tags = {**perfkit_tags(service), **(extra_tags or {})}
    pyroscope.configure(
        application_name=service,
        server_address=server_address,
        sample_rate=sample_rate,
        tags=tags,
        oncpu=True,  # CPU time, as the stage profiles; idle event-loop waits are not samples
        gil_only=True,
    )
    return tags
