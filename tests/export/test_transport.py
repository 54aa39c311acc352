"""What a failed export says: the backend's fault, or a missing extra."""

from __future__ import annotations

import builtins
import logging
from typing import Any

import pytest

from litellm_perfkit._core import _guard
from litellm_perfkit._export._metrics import MetricStore
from litellm_perfkit._export._settings import ExportSettings
from litellm_perfkit._export._transport import OtlpHttpExporter
from tests.support.servers import free_port


def test_protobuf_without_the_otlp_extra_names_the_extra(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_protobuf(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("google.protobuf"):
            raise ModuleNotFoundError("No module named 'google'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_protobuf)
    monkeypatch.setattr(_guard, "_warned", set())
    dead = f"http://127.0.0.1:{free_port()}"
    settings = ExportSettings(endpoint=dead, traces_endpoint=f"{dead}/v1/traces", metrics_endpoint=f"{dead}/v1/metrics")
    exporter = OtlpHttpExporter(settings, "http/protobuf")
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        assert exporter.export_metrics(MetricStore(), 0, 1) is False
    (message,) = [r.getMessage() for r in caplog.records]
    assert "ModuleNotFoundError" in message and "litellm_perfkit[otlp]" in message and "http/json" in message
    assert "may not take OTLP metrics" not in message
