"""Every export protocol, traces and metrics, from a clean venv holding exactly
perfkit's part of the README's install for ``perfkit run`` (``-e '.[cli]'``).

LiteLLM is left out of that venv on purpose: litellm[proxy] 1.103.0 brings
opentelemetry-proto and protobuf itself, 1.83.14 neither, so only a venv
without it shows what perfkit's own install needs. A small app
(tests/support/protocol_app.py) runs under ``perfkit run`` with each
protocol's flags; its spans go to a real Jaeger, its OTLP metrics to a
receiver here that decodes them with opentelemetry-proto, and its Prometheus
metrics are scraped from ``perfkit run --prometheus-port``.

The venv is built once per pyproject.toml (and checkout), under
``$PERFKIT_CACHE_DIR/venvs``; perfkit is installed editable, as the README
does, so later changes to the code need no rebuild.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._bench._launch import free_port
from litellm_perfkit._bench._venvs import CACHE
from tests.support.prometheus import scrape, serving_metrics
from tests.support.receiver import Received, metrics_of, otlp_grpc_receiver, otlp_receiver
from tests.support.servers import Jaeger

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "support" / "protocol_app.py"
REQUESTS = 4
STAGES = ("auth", "upstream")
SPANS = REQUESTS * (1 + len(STAGES))  # each request's server span and its stages'


def readme_requirement() -> str:
    """perfkit's requirement in the README's install line for perfkit run / bench."""
    readme = (ROOT / "README.md").read_text()
    [line] = [line for line in readme.splitlines() if "pip install" in line and ".venv/bin/perfkit bench" in line]
    found = re.search(r"pip install -q (-e '\.\[[a-z,]+\]')", line)
    assert found, f"the README's install line changed shape: {line}"
    return found.group(1)


@pytest.fixture(scope="module")
def venv_bin() -> Path:
    """The cached venv's bin directory; built when pyproject.toml (or the checkout) changed."""
    requirement = readme_requirement()
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + f"{ROOT}\0{requirement}".encode()).hexdigest()
    venv = CACHE / "venvs" / f"readme-run-{key[:16]}-py{sys.version_info.major}.{sys.version_info.minor}"
    marker = venv / ".complete"
    if not marker.exists():
        for stale in venv.parent.glob(f"readme-run-*-py{sys.version_info.major}.{sys.version_info.minor}"):
            checkout = stale / ".checkout"
            if checkout.is_file() and checkout.read_text() == str(ROOT):
                shutil.rmtree(stale)  # this checkout's, for an older pyproject.toml
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        editable, extras = requirement.split(" ", 1)
        install = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        done = subprocess.run(
            [*install, editable, str(ROOT) + extras.strip("'").removeprefix(".")],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (venv / ".checkout").write_text(str(ROOT))
        marker.write_text(requirement)
    return venv / "bin"


def test_the_venv_holds_no_protobuf_package(venv_bin: Path) -> None:
    """What the encoders would have needed is not there, so the tests below prove they need none of it."""
    check = "import importlib.util as u; print([m for m in ('google', 'opentelemetry.proto') if u.find_spec(m)])"
    found = subprocess.run([str(venv_bin / "python"), "-I", "-c", check], capture_output=True, text=True, timeout=60)
    assert (found.returncode, found.stdout.strip()) == (0, "[]"), found.stderr


def app_env(**variables: str) -> dict[str, str]:
    """A plain environment: no OTEL_* or proxy settings from the test's own."""
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    return {
        **{k: v for k, v in os.environ.items() if k in keep},
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        **variables,
    }


def run_app(venv_bin: Path, flags: list[str], env: dict[str, str], hold: bool = False) -> subprocess.Popen[str]:
    command = [str(venv_bin / "perfkit"), "run", "--record-rate", "all", *flags, "--"]
    command += [str(venv_bin / "python"), str(APP), str(REQUESTS), *(["--hold"] if hold else [])]
    return subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finished(process: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0 and "flushed" in out, err[-3000:]
    assert "Traceback" not in err and "cannot export" not in err, err[-3000:]
    return out, err


def check_metrics(received: Received, encoding: str) -> None:
    """The OTLP metrics arrived and decode, with every request counted in
    the last (cumulative) export: its duration, and each stage's."""
    requests = metrics_of(received, encoding)
    assert requests, "no OTLP metrics arrived"
    counts: dict[tuple[str, str], int] = {}
    for metric in requests[-1].resource_metrics[0].scope_metrics[0].metrics:
        for point in metric.histogram.data_points:
            stage = next((a.value.string_value for a in point.attributes if a.key == "stage"), "")
            counts[(metric.name, stage)] = counts.get((metric.name, stage), 0) + point.count
    assert counts[("perfkit.request.duration", "")] == REQUESTS
    for stage in STAGES:
        assert counts[("perfkit.stage.duration", stage)] == REQUESTS, counts


def check_spans(jaeger: Jaeger, service: str) -> None:
    traces = jaeger.wait_for_spans(service, count=SPANS)
    names = sorted(s["operationName"] for t in traces for s in t["spans"])
    assert names == sorted(["POST /v1/chat/completions", *STAGES] * REQUESTS)


@pytest.fixture
def service(request: pytest.FixtureRequest) -> str:
    """A Jaeger service name of the test's own."""
    return "readme-install-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_otlp_over_http(venv_bin: Path, jaeger: Jaeger, service: str, protocol: str) -> None:
    with otlp_receiver() as (metrics_url, received):
        flags = ["--service-name", service, "--protocol", protocol, "--endpoint", jaeger.otlp_http]
        env = app_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"{metrics_url}/v1/metrics")
        finished(run_app(venv_bin, flags, env))
    check_spans(jaeger, service)
    check_metrics(received, "protobuf" if protocol == "http/protobuf" else "json")
    content_types = {h.get("Content-Type") for h in received.headers}
    assert content_types == {"application/x-protobuf" if protocol == "http/protobuf" else "application/json"}


def test_otlp_over_grpc(venv_bin: Path, jaeger: Jaeger, service: str) -> None:
    with otlp_grpc_receiver() as (metrics_url, received):
        flags = ["--service-name", service, "--protocol", "grpc", "--endpoint", jaeger.otlp_grpc]
        _, err = finished(run_app(venv_bin, flags, app_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=metrics_url)))
    assert "needs grpcio" not in err  # grpcio came with the install: no fallback to HTTP
    check_spans(jaeger, service)
    check_metrics(received, "protobuf")


def spans_in(lines: list[str]) -> list[str]:
    """The names of the OTLP/JSON spans in these lines (one span per line)."""
    return sorted(orjson.loads(line)["name"] for line in lines if line.startswith('{"traceId"'))


def test_console_spans(venv_bin: Path) -> None:
    out, _ = finished(run_app(venv_bin, ["--exporter", "console"], app_env()))
    assert spans_in(out.splitlines()) == sorted(["POST /v1/chat/completions", *STAGES] * REQUESTS)


def test_jsonl_spans_with_out(venv_bin: Path, tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    finished(run_app(venv_bin, ["--out", str(path)], app_env()))
    assert spans_in(path.read_text().splitlines()) == sorted(["POST /v1/chat/completions", *STAGES] * REQUESTS)


def test_prometheus_scrape(venv_bin: Path) -> None:
    prometheus_port = free_port()
    flags = list(serving_metrics(prometheus_port))
    process = run_app(venv_bin, flags, app_env(), hold=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "flushed", process.stderr.read() if process.stderr else ""
        families = scrape(prometheus_port, timeout=10)
    finally:
        process.communicate(input="", timeout=60)
    assert process.returncode == 0
    samples = {
        (s.name, s.labels.get("stage", "")): s.value
        for family in families.values()
        for s in family.samples
        if s.name.endswith("_count")
    }
    assert sum(v for (name, _), v in samples.items() if name == "perfkit_request_duration_seconds_count") == REQUESTS
    for stage in STAGES:
        assert samples[("perfkit_stage_duration_seconds_count", stage)] == REQUESTS
