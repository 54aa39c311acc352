"""OTLP to a backend behind TLS, per signal: the certificate, client key and
client certificate variables, and each signal's headers, timeout and
compression, over HTTP and gRPC, against local servers with a test CA."""

from __future__ import annotations

import gzip
import logging
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from litellm_perfkit._core import _guard
from litellm_perfkit._export._metrics import MetricStore
from litellm_perfkit._export._settings import read_settings
from litellm_perfkit._export._spans import record_to_spans
from litellm_perfkit._export._transport import OtlpGrpcExporter, OtlpHttpExporter
from litellm_perfkit.types import RequestRecord
from tests.support.receiver import Received, otlp_receiver

SPANS = record_to_spans(
    RequestRecord(start_ns=1, end_ns=2_000_000, method="POST", path="/v1/chat/completions", status=200),
    "ab" * 16,
    "",
    0,
)


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    assert shutil.which("openssl"), (
        "these tests make their certificates with the openssl command: apt-get install openssl"
    )
    d = tmp_path_factory.mktemp("pki")
    # The extensions Python 3.13's strict verification (VERIFY_X509_STRICT) asks of a CA and its leaves.
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=perfkit test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-addext",
        "subjectKeyIdentifier=hash",
        cwd=d,
    )
    leaf = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nauthorityKeyIdentifier=keyid,issuer\n"
    for name in ("server", "client"):
        usage = (
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
            if name == "server"
            else "extendedKeyUsage=clientAuth\n"
        )
        (d / f"{name}.ext").write_text(leaf + usage)
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "1",
            "-extfile",
            f"{name}.ext",
            cwd=d,
        )
    return Pki(d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key")


@pytest.fixture
def https_receiver(pki: Pki) -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver that only talks to clients with a certificate from the test CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(pki.server_cert, pki.server_key)
    with otlp_receiver(tls=context) as (endpoint, received):
        yield endpoint, received


def tls_env(pki: Pki, endpoint: str, protocol: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca),
        "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(pki.client_key),
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(pki.client_cert),
        "OTEL_EXPORTER_OTLP_HEADERS": "x-both=1",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-signal=traces",
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-signal=metrics",
        "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "gzip",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500",
    }


def test_each_signal_reads_its_own_variables_over_the_general_ones(pki: Pki) -> None:
    s = read_settings(env=tls_env(pki, "https://127.0.0.1:1", "http/json"))
    assert (s.headers, s.metrics_headers) == (
        {"x-both": "1", "x-signal": "traces"},
        {"x-both": "1", "x-signal": "metrics"},
    )
    assert (s.compression, s.metrics_compression, s.timeout_s, s.metrics_timeout_s) == ("none", "gzip", 2.5, 10.0)
    assert (s.certificate, s.client_key, s.client_certificate) == (
        str(pki.ca),
        str(pki.client_key),
        str(pki.client_cert),
    )
    assert s.metrics_certificate == str(pki.ca)


def test_a_missing_certificate_file_is_one_warning(pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="litellm_perfkit"):
        s = read_settings(env={"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "/nonexistent/ca.pem"})
    assert s.certificate is None
    assert "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE='/nonexistent/ca.pem' is not valid (no such file)" in caplog.text


def test_https_with_a_private_ca_and_a_client_certificate(pki: Pki, https_receiver: tuple[str, Received]) -> None:
    endpoint, received = https_receiver
    exporter = OtlpHttpExporter(read_settings(env=tls_env(pki, endpoint, "http/json")), "http/json")
    try:
        assert exporter.export_spans(SPANS) is True
        assert exporter.export_metrics(MetricStore(), 0, 1) is True
    finally:
        exporter.close()
    traces_headers, metrics_headers = ({k.lower(): v for k, v in h.items()} for h in received.headers)
    assert (traces_headers["x-signal"], traces_headers["x-both"]) == (
        "traces",
        "1",
    ) and "content-encoding" not in traces_headers
    assert (metrics_headers["x-signal"], metrics_headers["content-encoding"]) == ("metrics", "gzip")
    assert len(received.bodies["/v1/traces"]) == 1 and gzip.decompress(received.bodies["/v1/metrics"][0]).startswith(
        b"{"
    )


def test_without_the_ca_the_backend_is_not_trusted(
    pki: Pki, https_receiver: tuple[str, Received], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_guard, "_warned", set())
    endpoint, received = https_receiver
    env = {k: v for k, v in tls_env(pki, endpoint, "http/json").items() if k != "OTEL_EXPORTER_OTLP_CERTIFICATE"}
    exporter = OtlpHttpExporter(read_settings(env=env), "http/json")
    try:
        assert exporter.export_spans(SPANS) is False  # dropped and counted, never raised into the app
    finally:
        exporter.close()
    assert received.bodies == {}


def test_grpc_with_a_private_ca_a_client_certificate_and_per_signal_metadata(pki: Pki) -> None:
    received: list[tuple[str, dict[str, str]]] = []

    def handler(method: str) -> Any:
        def answer(request: bytes, context: Any) -> bytes:
            received.append((method, dict(context.invocation_metadata())))
            return b""

        return grpc.unary_unary_rpc_method_handler(answer, request_deserializer=None, response_serializer=None)

    services = {
        "opentelemetry.proto.collector.trace.v1.TraceService": {"Export": handler("traces")},
        "opentelemetry.proto.collector.metrics.v1.MetricsService": {"Export": handler("metrics")},
    }
    server = grpc.server(futures.ThreadPoolExecutor(2))
    for service, methods in services.items():
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, methods),))
    credentials = grpc.ssl_server_credentials(
        [(pki.server_key.read_bytes(), pki.server_cert.read_bytes())],
        root_certificates=pki.ca.read_bytes(),
        require_client_auth=True,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        exporter = OtlpGrpcExporter(read_settings(env=tls_env(pki, f"https://127.0.0.1:{port}", "grpc")))
        try:
            assert exporter.export_spans(SPANS) is True
            assert exporter.export_metrics(MetricStore(), 0, 1) is True
        finally:
            exporter.close()
    finally:
        server.stop(None)
    assert [(method, metadata["x-signal"], metadata["x-both"]) for method, metadata in received] == [
        ("traces", "traces", "1"),
        ("metrics", "metrics", "1"),
    ]
