from __future__ import annotations

import logging

import pytest

from litellm_perfkit._export import read_settings
from litellm_perfkit._export._settings import ExportSettings


def test_defaults_follow_the_otel_spec() -> None:
    s = read_settings({})
    assert (s.exporter, s.protocol, s.sampler) == ("otlp", "http/protobuf", "parentbased_always_on")
    assert s.traces_endpoint == "http://localhost:4318/v1/traces"
    assert s.timeout_s == 10.0
    # The spec's batch schedule (OTEL_BSP_*): a drain costs the agent the same whatever it carries.
    assert (s.schedule_delay_s, s.max_queue, s.max_batch) == (5.0, 2048, 512)
    assert ExportSettings().schedule_delay_s == 5.0


def test_standard_variables_are_read() -> None:
    s = read_settings(
        {
            "OTEL_SERVICE_NAME": "gw",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9999/",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=a%20b, authorization=Bearer t",
            "OTEL_TRACES_SAMPLER": "traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "500",
        }
    )
    assert s.service_name == "gw" and s.protocol == "http/json"
    assert s.traces_endpoint == "http://127.0.0.1:9999/v1/traces"
    assert s.headers == {"x-tenant": "a b", "authorization": "Bearer t"}
    assert (s.sampler, s.sampler_ratio, s.timeout_s) == ("traceidratio", 0.25, 0.5)
    grpc = read_settings({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc.endpoint == grpc.traces_endpoint == grpc.metrics_endpoint == "http://localhost:4317"
    # Per signal, used as given, for gRPC as for HTTP.
    split = read_settings(
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://metrics:4317"}
    )
    assert (split.traces_endpoint, split.metrics_endpoint) == ("http://localhost:4317", "http://metrics:4317")


@pytest.mark.parametrize(
    ("variable", "value", "field", "fallback"),
    [
        ("OTEL_TRACES_EXPORTER", "zipkin", "exporter", "otlp"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon", "protocol", "http/protobuf"),
        ("OTEL_TRACES_SAMPLER", "sometimes", "sampler", "parentbased_always_on"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318", "endpoint", "http://localhost:4318"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon", "timeout_s", 10.0),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "-3", "max_queue", 2048),
        # perfkit's metrics go out over OTLP or Prometheus; a console for them is not one of its exporters.
        ("OTEL_METRICS_EXPORTER", "console", "metrics", True),
    ],
)
def test_an_invalid_value_gets_one_clear_warning_and_a_default(
    caplog: pytest.LogCaptureFixture, variable: str, value: str, field: str, fallback: object
) -> None:
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        settings = read_settings({variable: value})
    assert getattr(settings, field) == fallback
    [message] = [r.getMessage() for r in caplog.records]
    assert variable in message and repr(value) in message and "using" in message


def test_litellm_variables_are_a_fallback_and_perfkit_variables_win() -> None:
    litellm = {
        "OTEL_EXPORTER": "otlp_http",
        "OTEL_ENDPOINT": "https://collector.example:4318/v1/traces",
        "OTEL_HEADERS": "x-team=a",
    }
    s = read_settings(litellm)
    assert (s.protocol, s.traces_endpoint, s.metrics_endpoint) == (
        "http/protobuf",
        "https://collector.example:4318/v1/traces",
        "https://collector.example:4318/v1/metrics",
    )
    assert s.headers == {"x-team": "a"}
    grpc = read_settings({"OTEL_EXPORTER": "otlp_grpc", "OTEL_ENDPOINT": "http://collector:4317"})
    assert (grpc.protocol, grpc.endpoint) == ("grpc", "http://collector:4317")
    standard = read_settings(
        {**litellm, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4318", "OTEL_EXPORTER_OTLP_HEADERS": "k=v"}
    )
    assert standard.traces_endpoint == "http://mine:4318/v1/traces" and standard.headers == {"k": "v"}
    ours = read_settings(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://host-sdk:4318",
            "PERFKIT_OTEL_EXPORTER_OTLP_ENDPOINT": "http://perfkit:4318",
        }
    )
    assert ours.traces_endpoint == "http://perfkit:4318/v1/traces"


def test_otel_sdk_disabled_turns_export_off() -> None:
    s = read_settings({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"})
    assert s.exporter == "none" and not s.metrics
    assert read_settings({"OTEL_SDK_DISABLED": "false"}).exporter == "otlp"


def test_service_name_is_exported_once() -> None:
    from litellm_perfkit._export._otlp import _resource_attributes

    s = read_settings(
        {"OTEL_SERVICE_NAME": "from-name", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource,team=t"}
    )
    keys = [key for key, _ in _resource_attributes(s.service_name, s.resource_attributes)]
    assert (
        keys.count("service.name") == 1
        and dict(_resource_attributes(s.service_name, s.resource_attributes))["service.name"] == "from-name"
    )
