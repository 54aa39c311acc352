"""perfkit's Prometheus metrics as tests read them: the ``perfkit run`` flags that serve
them, their page's address, and a page parsed into families by name."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["metric_families", "metrics_url", "scrape", "serving_metrics"]


def serving_metrics(port: int, *exporter: str) -> tuple[str, ...]:
    """``perfkit run`` flags: the metrics on 127.0.0.1:``port``, the spans as ``exporter``
    says (default ``--exporter none``)."""
    return (*(exporter or ("--exporter", "none")), "--prometheus-port", str(port))


def metrics_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/metrics"


def metric_families(page: str) -> dict[str, Any]:
    """A Prometheus text page's metric families, by name."""
    return {family.name: family for family in text_string_to_metric_families(page)}


def scrape(port: int, timeout: float = 5) -> dict[str, Any]:
    """The families ``perfkit run --prometheus-port port`` serves now."""
    return metric_families(httpx.get(metrics_url(port), timeout=timeout).text)
