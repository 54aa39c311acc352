"""Real servers for tests: uvicorn in a thread, Jaeger as a process. All on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from litellm_perfkit._bench._launch import free_port
from litellm_perfkit._bench._venvs import CACHE, cache_lock

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def uvicorn_server(app: Any, **options: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 in a background thread; yields the base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@dataclass
class Jaeger:
    otlp_http: str
    otlp_grpc: str
    query: str
    pid: int

    def traces(self, service: str) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.query}/api/traces", params={"service": service, "limit": 1000}, timeout=10)
        response.raise_for_status()
        return list(response.json().get("data") or [])

    def wait_for_spans(self, service: str, count: int, timeout_s: float = 20) -> list[dict[str, Any]]:
        """Traces of ``service`` once at least ``count`` spans are stored."""
        deadline = time.monotonic() + timeout_s
        traces: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            traces = self.traces(service)
            if sum(len(t["spans"]) for t in traces) >= count:
                return traces
            time.sleep(0.25)
        raise AssertionError(f"Jaeger holds {sum(len(t['spans']) for t in traces)} spans of {service}, wanted {count}")


def jaeger_binary() -> Path:
    """The cached Jaeger build; builds it (about 5 minutes) when missing. Fails loudly."""
    version = os.environ.get("JAEGER_VERSION", "v1.76.0")
    binary = CACHE / f"jaeger-{version}" / "jaeger"
    with cache_lock(binary.parent.with_suffix(".lock")):  # the README's tests run two at a time
        if binary.exists():
            return binary
        result = subprocess.run(["bash", str(REPO / ".ci" / "build_jaeger.sh")], capture_output=True, text=True)
    if result.returncode != 0 or not binary.exists():
        raise RuntimeError(f"could not build Jaeger (needs Go and the Go module proxy):\n{result.stderr[-3000:]}")
    return binary


_JAEGER_CONFIG = """
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{health}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


@contextlib.contextmanager
def jaeger_process(workdir: Path) -> Iterator[Jaeger]:
    binary = jaeger_binary()
    for attempt in range(3):
        # A port free_port() found free can be taken by another test's server before Jaeger binds it.
        ports = {name: free_port() for name in ("query", "query_grpc", "health", "grpc", "http")}
        config = workdir / "jaeger.yaml"
        config.write_text(_JAEGER_CONFIG.format(**ports))
        log = (workdir / "jaeger.log").open("wb")
        process = subprocess.Popen([str(binary), "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)
        try:
            if _jaeger_ready(process, workdir, ports["query"], retry=attempt < 2):
                break
        except BaseException:
            _stop(process, log)
            raise
        _stop(process, log)
    try:
        yield Jaeger(
            otlp_http=f"http://127.0.0.1:{ports['http']}",
            otlp_grpc=f"http://127.0.0.1:{ports['grpc']}",
            query=f"http://127.0.0.1:{ports['query']}",
            pid=process.pid,
        )
    finally:
        _stop(process, log)


def _jaeger_ready(process: subprocess.Popen[bytes], workdir: Path, query: int, retry: bool) -> bool:
    """True once Jaeger answers; False if it exited because a port was taken and ``retry``; else raises."""
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            text = (workdir / "jaeger.log").read_text()
            if retry and "address already in use" in text:
                return False
            raise RuntimeError("Jaeger exited:\n" + text[-3000:])
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{query}/api/services", timeout=1).status_code == 200:
                return True
        if time.monotonic() > deadline:
            raise RuntimeError("Jaeger did not become ready:\n" + (workdir / "jaeger.log").read_text()[-3000:])
        time.sleep(0.2)


@dataclass(frozen=True)
class Prometheus:
    url: str
    """Its HTTP API, e.g. ``{url}/api/v1/query``."""

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result vector (``at``: a Unix time, default now)."""
        params: dict[str, str] = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        response = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=10)
        body = response.json()
        if response.status_code != 200 or body.get("status") != "success":
            raise RuntimeError(f"{promql}: {response.status_code} {body}")
        return body["data"]["result"]  # type: ignore[no-any-return]

    def value(self, promql: str, at: float | None = None) -> float:
        """The value of an instant query whose result is one sample."""
        return float(self.query(promql, at)[0]["value"][1])

    def scraped(self, job: str) -> int:
        """How many scrapes of ``job`` it has stored so far (``up``'s samples)."""
        found = self.query(f'count_over_time(up{{job="{job}"}}[1h])')
        return int(float(found[0]["value"][1])) if found else 0


_PROMETHEUS_CONFIG = """\
global:
  scrape_interval: {interval}
  evaluation_interval: {interval}
scrape_configs:
  - job_name: {job}
    static_configs:
      - targets: [{targets}]
"""


@contextlib.contextmanager
def prometheus_process(workdir: Path, job: str, targets: list[str], interval: str = "1s") -> Iterator[Prometheus]:
    """Debian's ``prometheus`` on 127.0.0.1, scraping ``targets`` (host:port) every ``interval`` as ``job``.
    Fails loudly without the program (.ci/system_packages.sh installs it)."""
    binary = subprocess.run(["sh", "-c", "command -v prometheus"], capture_output=True, text=True).stdout.strip()
    if not binary:
        raise AssertionError("prometheus is not installed: apt-get install prometheus (.ci/system_packages.sh)")
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        _PROMETHEUS_CONFIG.format(interval=interval, job=job, targets=", ".join(f"'{t}'" for t in targets))
    )
    log_path = workdir / "prometheus.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError("prometheus exited:\n" + log_path.read_text()[-3000:])
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready:\n" + log_path.read_text()[-3000:])
            time.sleep(0.2)
        yield Prometheus(url)
    finally:
        _stop(process, log)


def _stop(process: subprocess.Popen[bytes], log: Any) -> None:
    """SIGTERM, ten seconds to go, then SIGKILL; the log closed."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()
