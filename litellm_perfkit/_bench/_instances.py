"""``perfkit bench --instances N``: N proxies, each under ``perfkit run`` with
its own workers, sharing the deployment's database and Redis.

The load driver spreads the load: it opens its keep-alive connections to
each instance in turn, so a closed loop's users divide evenly, as behind a
layer-4 balancer, with no balancer's hop in the client-observed latency.
Every instance exports its spans to the bench's one receiver, so the stage
table joins every instance's requests. Each serves perfkit's Prometheus
page (``perfkit run --prometheus-port``): the requests it answered, by
status, counted by perfkit's tally (every request, warm-ups included).
"""

from __future__ import annotations

import http.client
import os
import queue
import re
import shlex
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast
from urllib.parse import urlsplit

from .._executables import find_executable
from .._export._prometheus import REQUESTS_FAMILY
from .._wire._environment_variables import (
    OTEL_BSP_SCHEDULE_DELAY,
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_SERVICE_NAME,
    PERFKIT_RECORD_RATE,
    PERFKIT_STEPS,
)
from ..types import BenchInstance
from ._deploy import Deployed
from ._heartbeat import Say
from ._launch import (
    OFFLINE_ENV,
    Agents,
    Child,
    Children,
    ProxyMode,
    free_port,
    port_open,
    start_litellm,
    tree_usage,
)
from ._options import BenchError, BenchOptions, scenario_config
from ._venvs import VenvError, litellm_python

__all__ = [
    "EXPORT_DELAY_MS",
    "Instance",
    "PhaseCpu",
    "answered",
    "instances_usage",
    "proxy_bin",
    "proxy_config",
    "start_instances",
    "start_proxy",
]

# The bench reads a phase's spans soon after it ends: its proxies hand them
# over every 200 ms, not at perfkit's default schedule (5 s).
EXPORT_DELAY_MS = 200
START_TIMEOUT_S = 180.0

T = TypeVar("T")

_REQUESTS = re.compile(rf"^{REQUESTS_FAMILY}\{{(?P<labels>[^}}]*)\}}\s+(?P<value>\S+)", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Instance:
    url: str
    child: Child
    metrics_port: int | None  # perfkit's Prometheus page, when asked for

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 80)


def start_instances(count: int, start: Callable[[int], T]) -> list[T]:
    """``start(i)`` for every instance at once (a proxy with a database takes a
    minute to start; they start side by side), in order; the first failure is
    raised without waiting for the other starts.

    Each start runs in a daemon thread: on a stop signal or a failed start, the
    caller leaves its ``Children``, which stops what the starts have started
    (a pip, a proxy) and refuses what they ask for after; a start still
    blocked then (on the venv's lock, say) does not keep the process alive."""
    if count == 1:
        return [start(0)]
    outcomes: queue.SimpleQueue[tuple[int, T | None, BaseException | None]] = queue.SimpleQueue()

    def run(index: int) -> None:
        try:
            outcomes.put((index, start(index), None))
        except BaseException as exc:  # the caller's to raise, or nobody's once it has left
            outcomes.put((index, None, exc))

    for index in range(count):
        threading.Thread(target=run, args=(index,), name=f"perfkit-start-{index}", daemon=True).start()
    started: dict[int, T] = {}
    while len(started) < count:
        try:
            # Woken often: the kernel may give a stop signal to a start thread, and its handler runs only
            # when this (the main) thread next runs Python code, which a wait with no timeout puts off
            # until a start ends.
            index, instance, error = outcomes.get(timeout=0.1)
        except queue.Empty:
            continue
        if error is not None:
            raise error
        started[index] = cast(T, instance)
    return [started[i] for i in range(count)]


def instances_usage(children: Sequence[Child], agents: Agents = "include") -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of every instance's process tree together."""
    cpu = rss = 0.0
    for child in children:
        c, r = tree_usage(child.process.pid, agents)
        cpu, rss = cpu + c, rss + r
    return cpu, rss


def _metrics_page(port: int) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        return connection.getresponse().read().decode(errors="replace")
    finally:
        connection.close()


def chat_answers(page: str) -> dict[str, int]:
    """Chat requests answered, by status code, from a Prometheus page of perfkit's."""
    counts: dict[str, int] = {}
    for match in _REQUESTS.finditer(page):
        labels = dict(_LABEL.findall(match["labels"]))
        if not labels.get("http_route", "").endswith("chat/completions"):
            continue
        status = labels.get("http_response_status_code", "")
        counts[status] = counts.get(status, 0) + int(float(match["value"]))
    return dict(sorted(counts.items()))


def answered(instances: Sequence[Instance]) -> list[BenchInstance]:
    """What each instance answered (perfkit's tally), for instances serving perfkit's page."""
    return [
        {"url": i.url, "answered": chat_answers(_metrics_page(i.metrics_port))}
        for i in instances
        if i.metrics_port is not None
    ]


def proxy_bin(version: str | None, say: Say | None = None, children: Children | None = None) -> tuple[Path, Path]:
    """(litellm executable, perfkit executable) for a version (its venv's installs run as ``children``), or the installed one."""
    if version is not None:
        try:
            python = litellm_python(version, say, children)
        except VenvError as exc:
            raise BenchError(str(exc)) from None
        return python.parent / "litellm", python.parent / "perfkit"
    litellm = find_executable("litellm")
    perfkit = find_executable("perfkit")
    if litellm is None:
        raise BenchError(
            "the LiteLLM proxy is not installed here: pip install 'litellm[proxy]' beside perfkit, "
            "or pass --litellm-version 1.103.0 (builds an isolated, cached venv), --proxy-command or --proxy-url"
        )
    return Path(litellm), Path(perfkit or "perfkit")


def proxy_config(options: BenchOptions, upstream: str, deployment: Deployed) -> str:
    """The LiteLLM config a target's proxies run: ``--config``'s or the scenario's, reaching the mock at ``upstream``."""
    router: dict[str, str] = {}
    if options.config:
        template = Path(options.config).read_text()
    else:
        template, router = scenario_config(options.scenario, options.provider, options.rpm)
    return deployment.config(template.replace("{upstream}", upstream), router)


def start_proxy(
    children: Children,
    options: BenchOptions,
    version: str | None,
    workers: int,
    upstream: str,
    receiver_endpoint: str,
    workdir: Path,
    deployment: Deployed,
    mode: ProxyMode = "perfkit",
) -> Instance:
    """One proxy of a target: ``--proxy-command``'s gateway, or LiteLLM under
    ``perfkit run`` with the scenario's config and the deployment's parts (or
    the same LiteLLM plain, ``mode``: the plain headline's twin)."""
    # Every request recorded and handed over soon: the bench joins each to its spans and attributes them.
    # Each step's CPU from the thread's CPU clock: the driver and the mock share the cores, and a step's
    # wall time would count their turns as the proxy's CPU.
    env = {
        OTEL_SERVICE_NAME: "perfkit-bench-proxy",
        PERFKIT_RECORD_RATE: "all",
        PERFKIT_STEPS: "cpu",
        OTEL_BSP_SCHEDULE_DELAY: str(EXPORT_DELAY_MS),
    }
    if options.proxy_command:
        port = free_port()
        command = shlex.split(options.proxy_command.format(port=port, upstream=upstream))
        env.update({OTEL_EXPORTER_OTLP_ENDPOINT: receiver_endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf"})
        for name, value in options.proxy_env:
            env[name] = os.pathsep.join(filter(None, (value, os.environ.get(name)))) if name == "PYTHONPATH" else value
        proxy = children.start("proxy", command, {**os.environ, **OFFLINE_ENV, **env}, workdir)
        proxy.wait_ready(lambda: port_open(port), timeout_s=180)
        return Instance(f"http://127.0.0.1:{port}", proxy, None)
    litellm, perfkit = proxy_bin(version, options.say, children)
    env.update(deployment.env)
    # perfkit's Prometheus page counts what each instance answered (a database's spend logs are checked against it).
    metrics_port = free_port() if options.instances > 1 or options.deployment != "plain" else None
    started = start_litellm(
        children,
        litellm,
        perfkit,
        proxy_config(options, upstream, deployment),
        workdir,
        workers=workers,
        mode=mode,
        perfkit_args=(
            "--endpoint",
            receiver_endpoint,
            "--protocol",
            "http/protobuf",
            "--server-timing",
            "on",
            "--overhead-header",
            "on",
            *(("--prometheus-port", str(metrics_port)) if metrics_port is not None else ()),
        )
        if mode == "perfkit"
        else (),
        env=env,
        # With a database LiteLLM takes a minute or more to start, instances side by side longer.
        timeout_s=START_TIMEOUT_S if options.deployment == "plain" and options.instances == 1 else 2 * START_TIMEOUT_S,
        say=options.say,
    )
    return Instance(started.url, started.child, metrics_port)


class PhaseCpu:
    """The proxies' CPU over a phase's measured part: read when the warm-up
    ends (a timer; the driver starts within milliseconds) and when the phase
    returns, so it is charged to the requests that phase counted."""

    def __init__(self, proxies: list[Child], warmup: tuple[float, int], agents: Agents = "exclude") -> None:
        self._proxies = proxies if not warmup[1] else []
        self._agents = agents
        self._at_warmup_end: float | None = None
        self._timer = threading.Timer(warmup[0], self._mark) if self._proxies else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def _mark(self) -> None:
        self._at_warmup_end = instances_usage(self._proxies, self._agents)[0]

    def per_request_ms(self, requests: int) -> float | None:
        if self._timer is None:
            return None
        self._timer.cancel()
        if self._at_warmup_end is None or not requests:
            return None
        return round((instances_usage(self._proxies, self._agents)[0] - self._at_warmup_end) * 1000 / requests, 4)
