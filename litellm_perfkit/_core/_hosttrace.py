"""One trace with the host: when the host runs OpenTelemetry, perfkit's
request span joins its trace, and spans opened inside the request join it.

Paid only when a real tracer provider is configured (an OpenTelemetry SDK's,
not the API's default proxy): the middleware then asks ``begin`` for each
request. It takes the parent from the current span (the host's ASGI
instrumentation has opened its SERVER span and extracted the caller's
context with the configured propagators, tracestate and baggage included)
or, when there is none, from the request's headers through the configured
propagators (``OTEL_PROPAGATORS``); chooses the request span's ids now; and
makes that span current while the app runs, so that spans the app opens
(LiteLLM's ``otel`` callback's among them) are its children; each block
stage is then the current span while it is open (``enter_stage``), under
the id the exporter gives it (``stage_span_id``). Without a provider, a
request costs one integer comparison here, and a stage one comparison.
"""

from __future__ import annotations

import random
import sys
from contextvars import Token
from typing import Any

from .._wire._headers import format_traceparent, stage_span_id
from ._guard import internal_error

__all__ = ["HOST_TRACING"]

_RECHECK_NS = (
    1_000_000_000  # a provider set after start-up (LiteLLM sets one when its otel callback loads) is seen within 1 s
)


class _HostTracing:
    __slots__ = ("active", "next_check_ns", "_random")

    def __init__(self) -> None:
        self.active = False
        self.next_check_ns = 0
        self._random = random.Random()

    def refresh(self, now_ns: int) -> bool:
        """Whether a real tracer provider is configured now (checked at most once a second)."""
        self.next_check_ns = now_ns + _RECHECK_NS
        trace = sys.modules.get("opentelemetry.trace")
        if trace is None:  # nobody imported OpenTelemetry: nobody traces
            return False
        try:
            provider = trace.get_tracer_provider()
            self.active = not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
        except Exception as exc:
            internal_error("hosttrace.refresh", exc)
        return self.active

    def begin(self, timeline: Any, headers: list[tuple[bytes, bytes]]) -> Token[Any] | None:
        """Parent and ids for this request's span; its context made current (detach with ``end``)."""
        try:
            from opentelemetry import context, propagate, trace

            parent = trace.get_current_span().get_span_context()
            if not parent.is_valid:
                carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}
                parent = trace.get_current_span(propagate.extract(carrier)).get_span_context()
            bits = self._random.getrandbits
            if parent.is_valid:
                timeline.traceparent = format_traceparent(
                    f"{parent.trace_id:032x}", f"{parent.span_id:016x}", int(parent.trace_flags)
                )
                trace_id, flags = parent.trace_id, parent.trace_flags
            else:
                trace_id, flags = bits(128) or 1, trace.TraceFlags(trace.TraceFlags.SAMPLED)
            span_id = bits(64) or 1
            timeline.span_context = (f"{trace_id:032x}", f"{span_id:016x}")
            own = trace.SpanContext(
                trace_id,
                span_id,
                is_remote=False,
                trace_flags=flags,
                trace_state=parent.trace_state if parent.is_valid else None,
            )
            return context.attach(trace.set_span_in_context(trace.NonRecordingSpan(own)))
        except Exception as exc:
            internal_error("hosttrace.begin", exc)
            return None

    def end(self, token: Token[Any]) -> None:
        try:
            from opentelemetry import context

            context.detach(token)
        except Exception as exc:
            internal_error("hosttrace.end", exc)

    def enter_stage(self, stage: Any) -> Token[Any] | None:
        """A stage opened in a request the host traces (its ``span_context``
        is set): make the stage the current span, under the id the exporter
        will give it, so that spans opened inside are its children."""
        try:
            from opentelemetry import context, trace

            timeline = stage._timeline
            enclosing = trace.get_current_span().get_span_context()
            span_id = int(stage_span_id(timeline.span_context[1], stage.name, stage.start_ns), 16)
            own = trace.SpanContext(
                int(timeline.span_context[0], 16),
                span_id,
                is_remote=False,
                trace_flags=enclosing.trace_flags,
                trace_state=enclosing.trace_state,
            )
            return context.attach(trace.set_span_in_context(trace.NonRecordingSpan(own)))
        except Exception as exc:
            internal_error("hosttrace.stage", exc)
            return None

    def exit_stage(self, token: Token[Any]) -> None:
        self.end(token)


HOST_TRACING = _HostTracing()
