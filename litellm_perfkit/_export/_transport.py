"""Senders for encoded OTLP payloads: HTTP (JSON or protobuf) and gRPC.

They run in the export agent (or thread). A failure returns False; the
pipeline counts what was dropped. A busy backend is tried again within the
export's timeout (``_retry``); the request path never waits for it.
"""

from __future__ import annotations

import gzip
import http.client
import ssl
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import IO, Any, Literal, Protocol
from urllib.parse import urlsplit

from .._core._guard import warn_once
from .._version import __version__
from .._wire._names import JSON_CONTENT_TYPE
from ..types import OtlpProtocol
from ._metrics import MetricStore
from ._otlp import metrics_json, metrics_protobuf, span_json, spans_json, spans_protobuf
from ._retry import RETRYABLE_HTTP_STATUSES, Busy, RetryPolicy, retry_after_s
from ._settings import ExportSettings
from ._spans import Span, SpanForm

__all__ = ["Exporter", "ProtobufExporter", "make_exporter"]


class Exporter(Protocol):
    span_form: SpanForm

    def export_spans(self, spans: list[Span]) -> bool: ...
    def export_metrics(self, store: MetricStore, start_unix_ns: int, now_unix_ns: int) -> bool: ...
    def close(self) -> None: ...


class ProtobufExporter(Exporter, Protocol):
    """An exporter whose ``span_form`` is "protobuf"."""

    def export_spans(self, spans: Sequence[Span | bytes]) -> bool: ...


class _HttpPost:
    """One keep-alive connection to one URL."""

    def __init__(self, url: str, signal: Signal, content_type: str) -> None:
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._signal = signal
        self._tls: ssl.SSLContext | None = (
            None  # built at the first connection: a bad file is an export failure, not the app's
        )
        headers, timeout_s, gzip_body = signal.headers, signal.timeout_s, signal.compression == "gzip"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._https else 80)
        self._path = parts.path or "/"
        self._timeout = timeout_s
        self._gzip = gzip_body
        self._headers = {
            **headers,
            "Content-Type": content_type,
            "User-Agent": f"litellm_perfkit/{__version__}",
        }
        if gzip_body:
            self._headers["Content-Encoding"] = "gzip"
        self._conn: http.client.HTTPConnection | None = None
        self.url = url

    def post(self, body: bytes, timeout_s: float | None = None) -> None:
        """Raises OSError or http.client errors; ``Busy`` when the backend asks
        to be tried again, RuntimeError on any other non-2xx answer."""
        if self._gzip:
            body = gzip.compress(body)
        timeout = self._timeout if timeout_s is None else min(self._timeout, timeout_s)
        for attempt in (1, 2):  # a kept-alive connection may have been closed by the peer
            if self._conn is None:
                if self._https:
                    if self._tls is None:
                        self._tls = _ssl_context(self._signal)
                    self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
                else:
                    self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            elif self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
            try:
                self._conn.request("POST", self._path, body=body, headers=self._headers)
                response = self._conn.getresponse()
                answer = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt == 2:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            if response.status in RETRYABLE_HTTP_STATUSES:
                raise Busy(
                    f"HTTP {response.status}: {answer[:200]!r}", retry_after_s(response.getheader("Retry-After"))
                )
            if not 200 <= response.status < 300:
                raise RuntimeError(f"HTTP {response.status}: {answer[:200]!r}")
            return

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True)
class Signal:
    """One signal's (traces' or metrics') connection settings."""

    headers: dict[str, str]
    timeout_s: float
    compression: str
    certificate: str | None
    client_key: str | None
    client_certificate: str | None

    @classmethod
    def of(cls, settings: ExportSettings, signal: Literal["traces", "metrics"]) -> Signal:
        prefix = "metrics_" if signal == "metrics" else ""
        return cls(*(getattr(settings, prefix + f.name) for f in fields(cls)))


def _ssl_context(signal: Signal) -> ssl.SSLContext:
    """The system's trust store, or the CA bundle given; a client certificate for mutual TLS."""
    context = ssl.create_default_context(cafile=signal.certificate)
    if signal.client_certificate:
        context.load_cert_chain(signal.client_certificate, signal.client_key)
    return context


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as file:
        return file.read()


def _failed(kind: str, target: str, exc: BaseException) -> bool:
    if kind == "spans":
        consequence = "they are dropped and counted (perfkit.spans.dropped)"
    else:
        consequence = "this backend may not take OTLP metrics; they are retried at the next interval"
    warn_once(
        f"export.{kind}.{target}",
        "perfkit: cannot export %s to %s (%s: %s); %s, the app is unaffected",
        kind,
        target,
        type(exc).__name__,
        exc,
        consequence,
    )
    return False


class OtlpHttpExporter:
    def __init__(self, settings: ExportSettings, encoding: OtlpProtocol) -> None:
        self._settings = settings
        self._protobuf = encoding == "http/protobuf"
        self.span_form: SpanForm = "protobuf" if self._protobuf else "tuples"
        content_type = "application/x-protobuf" if self._protobuf else JSON_CONTENT_TYPE
        traces, metrics = Signal.of(settings, "traces"), Signal.of(settings, "metrics")
        self._traces = _HttpPost(settings.traces_endpoint, traces, content_type)
        self._metrics = _HttpPost(settings.metrics_endpoint, metrics, content_type)
        self._retry = RetryPolicy(traces.timeout_s)
        self._metrics_retry = RetryPolicy(metrics.timeout_s)

    def export_spans(self, spans: Sequence[Span | bytes]) -> bool:
        s = self._settings
        try:
            encode = spans_protobuf if self._protobuf else spans_json
            body = encode(spans, s.service_name, s.resource_attributes)
            self._retry.run(lambda left: self._traces.post(body, left))
            return True
        except Exception as exc:
            return _failed("spans", self._traces.url, exc)

    def export_metrics(self, store: MetricStore, start_unix_ns: int, now_unix_ns: int) -> bool:
        s = self._settings
        try:
            encode = metrics_protobuf if self._protobuf else metrics_json
            body = encode(store, s.service_name, s.resource_attributes, start_unix_ns, now_unix_ns)
            self._metrics_retry.run(lambda left: self._metrics.post(body, left))
            return True
        except Exception as exc:
            return _failed("metrics", self._metrics.url, exc)

    def close(self) -> None:
        self._traces.close()
        self._metrics.close()


class OtlpGrpcExporter:
    """OTLP over gRPC. Requests are already protobuf bytes, so they are sent as
    they are (identity serializers) and only grpcio is needed."""

    _TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    _METRICS = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
    span_form: SpanForm = "protobuf"

    def __init__(self, settings: ExportSettings) -> None:
        import grpc

        self._settings = settings
        busy = grpc.StatusCode
        # The OTLP/gRPC specification's retryable codes; RESOURCE_EXHAUSTED
        # only when the server says when to retry (RetryInfo).
        self._busy_codes = {
            busy.CANCELLED,
            busy.DEADLINE_EXCEEDED,
            busy.ABORTED,
            busy.OUT_OF_RANGE,
            busy.UNAVAILABLE,
            busy.DATA_LOSS,
        }
        self._channels: list[Any] = []
        self._traces_target, self._export_traces = self._sender(
            self._TRACES, settings.traces_endpoint, Signal.of(settings, "traces")
        )
        self._metrics_target, self._export_metrics = self._sender(
            self._METRICS, settings.metrics_endpoint, Signal.of(settings, "metrics")
        )

    def _sender(self, method: str, endpoint: str, signal: Signal) -> tuple[str, Callable[[bytes], None]]:
        """Sends one signal's requests on a channel of its own (its endpoint,
        TLS files, headers, timeout and compression), retrying a busy backend."""
        import grpc

        parts = urlsplit(endpoint)
        target = f"{parts.hostname}:{parts.port or 4317}"
        if parts.scheme == "https":
            credentials = grpc.ssl_channel_credentials(
                _read(signal.certificate), _read(signal.client_key), _read(signal.client_certificate)
            )
            channel = grpc.secure_channel(target, credentials)
        else:
            channel = grpc.insecure_channel(target)
        self._channels.append(channel)
        call = channel.unary_unary(method)
        metadata = [(k.lower(), v) for k, v in signal.headers.items()]
        compression = grpc.Compression.Gzip if signal.compression == "gzip" else grpc.Compression.NoCompression
        retry = RetryPolicy(signal.timeout_s)

        def send_once(request: bytes, left: float) -> None:
            try:
                call(request, timeout=left, metadata=metadata, compression=compression)
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else None
                trailing = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
                if code in self._busy_codes or (
                    code == grpc.StatusCode.RESOURCE_EXHAUSTED and "google.rpc.retryinfo-bin" in trailing
                ):
                    raise Busy(f"gRPC {code}") from exc
                raise

        return target, lambda request: retry.run(lambda left: send_once(request, left))

    def export_spans(self, spans: Sequence[Span | bytes]) -> bool:
        s = self._settings
        try:
            self._export_traces(spans_protobuf(spans, s.service_name, s.resource_attributes))
            return True
        except Exception as exc:
            return _failed("spans", self._traces_target, exc)

    def export_metrics(self, store: MetricStore, start_unix_ns: int, now_unix_ns: int) -> bool:
        s = self._settings
        try:
            self._export_metrics(
                metrics_protobuf(store, s.service_name, s.resource_attributes, start_unix_ns, now_unix_ns)
            )
            return True
        except Exception as exc:
            return _failed("metrics", self._metrics_target, exc)

    def close(self) -> None:
        for channel in self._channels:
            channel.close()


def _write_and_flush(stream: IO[bytes], data: bytes) -> None:
    stream.write(data)
    stream.flush()


class LineExporter:
    """One OTLP/JSON span object per line, to stdout (console) or a file (jsonl).
    A write that fails (a full disk, a closed pipe) drops the batch, counted
    as any failed export is, and is logged once."""

    span_form: SpanForm = "tuples"

    def __init__(
        self, write: Callable[[bytes], Any], close: Callable[[], None] | None = None, where: str = "stdout"
    ) -> None:
        self._write = write
        self._close = close
        self._where = where

    def export_spans(self, spans: list[Span]) -> bool:
        try:
            self._write("".join(span_json(s) + "\n" for s in spans).encode())
        except (OSError, ValueError) as exc:  # ValueError: written after the file was closed
            self._failed(exc)
            return False
        return True

    def _failed(self, exc: Exception) -> None:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        warn_once(
            f"export.lines.{self._where}",
            "perfkit: cannot write spans to %s (%s); spans are dropped and counted until it can",
            self._where,
            reason,
        )

    def export_metrics(self, store: MetricStore, start_unix_ns: int, now_unix_ns: int) -> bool:
        return True

    def close(self) -> None:
        if self._close is not None:
            try:
                self._close()  # flushes what a full disk left in the buffer
            except OSError as exc:
                self._failed(exc)


def _grpc_available() -> bool:
    try:
        import grpc  # noqa: F401
    except ImportError:
        warn_once(
            "export.protocol",
            "perfkit: OTLP over grpc needs grpcio: pip install 'litellm_perfkit[cli]' (or [otlp]); "
            "using http/protobuf on port 4318",
        )
        return False
    return True


def make_exporter(settings: ExportSettings) -> Exporter | None:
    if settings.exporter == "none":
        return None
    if settings.exporter == "sdk":
        from ._sdk import SDK_MISSING, SdkExporter, host_provider, sdk_installed

        if not sdk_installed():
            warn_once("export.sdk", SDK_MISSING)
            return None
        provider = host_provider()
        if provider is None:
            warn_once(
                "export.sdk",
                "perfkit: OTEL_TRACES_EXPORTER=sdk, but no OpenTelemetry SDK tracer provider is set; spans are not exported",
            )
            return None
        return SdkExporter(provider)
    if settings.exporter == "console":
        return LineExporter(lambda data: _write_and_flush(sys.stdout.buffer, data))
    if settings.exporter == "jsonl":
        assert settings.jsonl_path is not None
        handle = open(settings.jsonl_path, "ab")  # noqa: SIM115 - closed by the exporter
        return LineExporter(lambda data: _write_and_flush(handle, data), handle.close, settings.jsonl_path)
    if settings.protocol == "grpc":
        if _grpc_available():
            return OtlpGrpcExporter(settings)
        settings = replace(
            settings,
            protocol="http/protobuf",
            traces_endpoint=_http_fallback(settings.traces_endpoint) + "/v1/traces",
            metrics_endpoint=_http_fallback(settings.metrics_endpoint) + "/v1/metrics",
        )
    return OtlpHttpExporter(settings, settings.protocol)


def _http_fallback(grpc_endpoint: str) -> str:
    """The OTLP/HTTP base on the same host as a gRPC endpoint: the standard port, 4318."""
    parts = urlsplit(grpc_endpoint)
    return f"{parts.scheme}://{parts.hostname}:4318"
