"""Never break the host: perfkit's own failures are counted and logged once."""

from __future__ import annotations

import logging
import threading

__all__ = ["internal_error", "internal_error_counts", "warn_once", "logger"]

logger = logging.getLogger("litellm_perfkit")
_counts: dict[str, int] = {}
_warned: set[str] = set()
_lock = threading.Lock()


def internal_error(where: str, exc: BaseException) -> None:
    """Count a perfkit failure at ``where``; log it the first time only."""
    with _lock:
        first = where not in _counts
        _counts[where] = _counts.get(where, 0) + 1
    if first:
        logger.warning(
            "perfkit: internal error in %s (%s: %s); the request is unaffected, "
            "further errors here are counted, not logged",
            where,
            type(exc).__name__,
            exc,
        )


def internal_error_counts() -> dict[str, int]:
    with _lock:
        return dict(_counts)


def warn_once(key: str, message: str, *args: object) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message, *args)
