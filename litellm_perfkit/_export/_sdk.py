"""The ``sdk`` exporter: perfkit's spans handed to the host's OpenTelemetry SDK.

Every span processor of the host's tracer provider sees perfkit's spans as
finished spans (``on_end``), with perfkit's ids, times and attributes, so
any SpanExporter the host uses (console, a vendor's) exports them. The spans
are built in the app process (thread mode), off the request path as always.
The provider hands its span processors to every tracer it makes, where they
are public (``Tracer.span_processor``): perfkit takes them from its own
tracer. A tracer without them (a disabled SDK's) is reported once and
nothing is exported.

The SDK is an extra (``litellm_perfkit[sdk]``): a host with a tracer provider
has it already. Chosen without it, the exporter is one warning and no export.
"""

from __future__ import annotations

from typing import Any

from .._core._guard import warn_once
from .._version import __version__
from .._wire._names import INSTRUMENTATION_SCOPE
from ._metrics import MetricStore
from ._spans import SPAN_KIND_SERVER, STATUS_ERROR, Span, SpanForm

__all__ = ["SDK_MISSING", "SdkExporter", "host_provider", "sdk_installed"]

SDK_MISSING = (
    "perfkit: OTEL_TRACES_EXPORTER=sdk needs the OpenTelemetry SDK (pip install 'litellm_perfkit[sdk]'); "
    "spans are not exported"
)


def sdk_installed() -> bool:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


def host_provider() -> Any | None:
    """The host's SDK tracer provider, or None (no SDK, or only the API's default proxy)."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return None
    provider = trace.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


class SdkExporter:
    span_form: SpanForm = "tuples"  # the host's SDK takes its own span objects, made from the tuples

    def __init__(self, provider: Any) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        tracer = provider.get_tracer(INSTRUMENTATION_SCOPE, __version__)
        self._processor = getattr(tracer, "span_processor", None)
        if self._processor is None:
            warn_once(
                "export.sdk",
                "perfkit: this OpenTelemetry SDK's tracers have no span processors (is the SDK disabled?); "
                "its spans are not exported (use OTEL_TRACES_EXPORTER=otlp)",
            )
        self._resource = provider.resource
        self._scope = InstrumentationScope(INSTRUMENTATION_SCOPE, __version__)

    def export_spans(self, spans: list[Span]) -> bool:
        if self._processor is None:
            return False
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        sampled = TraceFlags(TraceFlags.SAMPLED)
        for trace_id, span_id, parent_id, name, kind, start, end, attributes, status, message in spans:
            trace_number = int(trace_id, 16)
            context = SpanContext(trace_number, int(span_id, 16), is_remote=False, trace_flags=sampled)
            parent = (
                SpanContext(trace_number, int(parent_id, 16), is_remote=False, trace_flags=sampled)
                if parent_id
                else None
            )
            self._processor.on_end(
                ReadableSpan(
                    name=name,
                    context=context,
                    parent=parent,
                    resource=self._resource,
                    attributes=dict(attributes),
                    kind=SpanKind.SERVER if kind == SPAN_KIND_SERVER else SpanKind.INTERNAL,
                    status=Status(StatusCode.ERROR, message or None)
                    if status == STATUS_ERROR
                    else Status(StatusCode.UNSET),
                    start_time=start,
                    end_time=end,
                    instrumentation_scope=self._scope,
                )
            )
        return True

    def export_metrics(self, store: MetricStore, start_unix_ns: int, now_unix_ns: int) -> bool:
        return True  # metrics stay perfkit's (OTLP or Prometheus); the host's MeterProvider is not fed

    def close(self) -> None:
        return None  # the host owns its provider and flushes it
