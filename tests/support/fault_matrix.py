"""The fault matrix: an instrumented app under load from ``perfkit load``,
exporting to a backend that fails in a chosen way, against the same app
without perfkit under the same load (tests/integration/test_fault_matrix.py,
benchmarks/soak.py, docs/reliability.md).

Per fault it measures what the issue asks for: the answers to fixed probes
against the plain app's (tests/support/probes.py), the latency added
(median, against the plain app under the same load), the app's RSS and open
file descriptors after a warm-up and after the load, and the counts: the
requests the app served (its own count, outside perfkit), those perfkit
counted and recorded, the spans the backend acknowledged, those perfkit
says it exported, and those it counted as dropped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from litellm_perfkit._bench._launch import Child, Children, free_port, port_open, start_mock
from litellm_perfkit._export._health import FIELDS
from tests.support.otlp_faults import Behaviour, FaultyReceiver, faulty_receiver
from tests.support.probes import HOSTILE, PROBES, Answer, Probe, send_past_refusals
from tests.support.procfs import agents_of, zombies_of

__all__ = ["FAULTS", "Fault", "Row", "Shape", "measure", "plain_run", "table"]

ROOT = Path(__file__).resolve().parents[2]
Backend = Behaviour | Literal["down"]
During = Literal["nothing", "restart backend", "kill agent"]
EXPORT_TIMEOUT_MS = 2000  # OTEL_EXPORTER_OTLP_TIMEOUT: a hung backend holds each export this long


@dataclass(frozen=True)
class Shape:
    """The load and the upstream: a plain run of the same shape is the reference."""

    stream: bool = True
    upstream: tuple[str, ...] = ()  # extra ``perfkit mock`` flags
    client_timeout_s: float = 30.0
    concurrency: int = 8
    warmup: int = 100  # requests before the "before" sample
    model: str | None = None  # None: perfkit load's default


@dataclass(frozen=True)
class Fault:
    name: str
    backend: Backend = "ok"
    shape: Shape = Shape()
    during: During = "nothing"
    probes: tuple[Probe, ...] = PROBES


FAULTS = (
    Fault("none (backend up)"),
    Fault("backend down (connection refused)", backend="down"),
    Fault("backend hung (accepts, never answers)", backend="hung"),
    Fault("backend slow (1 s per export)", backend="slow"),
    Fault("backend answers 503", backend="5xx"),
    Fault("backend answers 429 (Retry-After: 1)", backend="429"),
    Fault("backend restarted mid-run", during="restart backend"),
    Fault("export agent SIGKILLed mid-run", during="kill agent"),
    Fault("clients disconnect mid-stream", shape=Shape(upstream=("--itl-ms", "20"), client_timeout_s=0.15)),
    # One content chunk: the mock cuts every stream after its first event, the same place each time.
    Fault("upstream resets mid-stream", shape=Shape(upstream=("--disconnect-fraction", "1", "--chunks", "1"))),
    Fault(
        "upstream stalls (app gives up at 0.5 s)",
        shape=Shape(stream=False, upstream=("--timeout-fraction", "1"), concurrency=32, warmup=32),
    ),
    Fault("hostile requests (64 KB headers, 10,000 headers, bad UTF-8, bad traceparent)", probes=PROBES + HOSTILE),
)


def median_ms(load: dict[str, Any]) -> str:
    """A load's median latency over the requests that succeeded; a dash when none did."""
    latency = load["summary"]["latency_ms"]
    return f"{latency['p50']:.1f}" if latency and load["summary"]["ok"] else "—"


@dataclass
class Usage:
    rss_mib: float
    fds: int
    agents: list[int]
    threads: int
    sockets: int  # of ``fds``: a proxy's connection pools keep as many as it had requests in flight

    @property
    def own_fds(self) -> int:
        """Descriptors other than sockets: files, pipes, event fds (perfkit's to its agent among them)."""
        return self.fds - self.sockets


@dataclass
class Run:
    """One app run under one load: what the client saw, and what the app and perfkit counted."""

    load: dict[str, Any]
    answers: list[Answer]
    served: int
    before: Usage
    after: Usage
    health: dict[str, int] = field(default_factory=dict)
    zombies: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def p50_ms(self) -> str:
        return median_ms(self.load)


@dataclass
class Row:
    fault: Fault
    run: Run
    plain: Run
    acknowledged_spans: int
    received_spans: int
    request_errors: dict[str, int]  # the acknowledged request spans' error.type (OK: none)

    @property
    def answers_equal(self) -> bool:
        return self.run.answers == self.plain.answers


def usage(pid: int) -> Usage:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = {line.split(":")[0]: line.split()[1] for line in status.splitlines() if line.split()[1:]}
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed while it was read
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    sockets = sum(link.startswith("socket:") for link in links)
    return Usage(int(fields["VmRSS"]) / 1024, len(links), agents_of(pid), int(fields["Threads"]), sockets)


def load(url: str, shape: Shape, *, seconds: float | None = None, requests: int | None = None) -> dict[str, Any]:
    """``perfkit load`` (the product's driver, its own process): its result document."""
    amount = ["--duration", f"{seconds}s"] if seconds is not None else ["--requests", str(requests)]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        return _load(url, shape, amount, Path(out.name))


def _load(url: str, shape: Shape, amount: list[str], out: Path) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "litellm_perfkit._cli",
        "load",
        "--url",
        url,
        "--out",
        str(out),
        "--progress",
        "off",
    ]
    command += ["--concurrency", str(shape.concurrency), "--timeout", f"{shape.client_timeout_s}s", *amount]
    if shape.stream:
        command.append("--stream")
    if shape.model is not None:
        command += ["--model", shape.model]
    done = subprocess.run(command, capture_output=True, cwd=ROOT, timeout=600)
    # Exit 1 when every request failed (a client that always gives up first): still a result.
    assert done.returncode in (0, 1) and out.stat().st_size, done.stderr.decode(errors="replace")[-3000:]
    result: dict[str, Any] = orjson.loads(out.read_bytes())
    return result


@contextlib.contextmanager
def app_process(upstream: str, workdir: Path, endpoint: str | None) -> Iterator[tuple[Child, int]]:
    """tests/support/fault_app.py: plain when ``endpoint`` is None, else exporting there."""
    port = free_port()
    env = {**os.environ, "PERFKIT_RECORD_RATE": "all", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    command = [sys.executable, "-m", "tests.support.fault_app", "--port", str(port), "--upstream", upstream]
    command += ["--count-file", str(workdir / "served")]
    if endpoint is None:
        command.append("--plain")
    else:
        env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/json",
            OTEL_EXPORTER_OTLP_TIMEOUT=str(EXPORT_TIMEOUT_MS),
            OTEL_METRIC_EXPORT_INTERVAL="1000",
            PERFKIT_PROMETHEUS_DIR=str(workdir),
        )
    with Children() as children:
        child = children.start("fault-app", command, env=env, cwd=ROOT, log_path=workdir / "app.log")
        child.wait_ready(lambda: port_open(port), timeout_s=60)
        yield child, port


def act_mid_run(during: During, receiver: FaultyReceiver, agents: Callable[[], list[int]], seconds: float) -> None:
    """The mid-run fault: at a third of the load, and (restart) back at two thirds; ``agents``
    lists the export agents a "kill agent" row kills."""
    time.sleep(seconds / 3)
    if during == "restart backend":
        receiver.stop()
        time.sleep(seconds / 3)
        receiver.start()
    elif during == "kill agent":
        for agent in agents():
            os.kill(agent, signal.SIGKILL)


def _one_run(fault: Fault, upstream: str, workdir: Path, receiver: FaultyReceiver | None, seconds: float) -> Run:
    workdir.mkdir(parents=True, exist_ok=True)
    with app_process(upstream, workdir, receiver.url if receiver else None) as (child, port):
        url = f"http://127.0.0.1:{port}"
        pid = child.process.pid
        load(url, fault.shape, requests=fault.shape.warmup)
        before = usage(pid)
        actor = None
        if receiver is not None and fault.during != "nothing":
            actor = threading.Thread(
                target=act_mid_run, args=(fault.during, receiver, lambda: agents_of(pid), seconds), daemon=True
            )
            actor.start()
        result = load(url, fault.shape, seconds=seconds)
        answers = [send_past_refusals("127.0.0.1", port, probe) for probe in fault.probes]
        if actor is not None:
            actor.join()
        after = usage(pid)
        zombies = len(zombies_of(pid))
        child.process.send_signal(signal.SIGTERM)
        child.process.wait(60)
    served = int((workdir / "served").read_text())
    run = Run(result, answers, served, before, after, zombies=zombies)
    health = list(workdir.glob("*.health"))
    if health:
        run.health = {name: int(orjson.loads(health[0].read_bytes())[name]) for name in FIELDS}
    log = (workdir / "app.log").read_text(errors="replace")
    run.warnings = [line for line in log.splitlines() if line.startswith("perfkit:")]
    return run


def plain_run(shape: Shape, probes: tuple[Probe, ...], workdir: Path, seconds: float) -> Run:
    """The same app without perfkit under the same load, sent the same probes: the reference."""
    with Children() as children:
        upstream = start_mock(children, "--ttft-ms", "5", "--itl-ms", "1", "--chunks", "10", *shape.upstream)
        return _one_run(Fault("plain", shape=shape, probes=probes), upstream, workdir, None, seconds)


def measure(fault: Fault, workdir: Path, plain: Run, seconds: float) -> Row:
    with Children() as children, faulty_receiver("ok" if fault.backend == "down" else fault.backend) as receiver:
        if fault.backend == "down":
            receiver.stop()
        upstream = start_mock(children, "--ttft-ms", "5", "--itl-ms", "1", "--chunks", "10", *fault.shape.upstream)
        run = _one_run(fault, upstream, workdir, receiver, seconds)
        return Row(fault, run, plain, receiver.acknowledged_spans, receiver.received_spans, receiver.request_errors)


def table(rows: list[Row]) -> str:
    """The matrix as Markdown (docs/reliability.md)."""
    head = (
        "| fault | answers as plain | served / counted / recorded | spans exported (acked) / dropped "
        "| requests dropped | p50 ms plain → perfkit | RSS MiB before → after | fds before → after |"
    )
    lines = [head, "|" + "---|" * 8]
    for row in rows:
        run, h = row.run, row.run.health
        lines.append(
            f"| {row.fault.name} | {'yes' if row.answers_equal else 'NO'} "
            f"| {run.served:,} / {h.get('requests', 0):,} / {h.get('recorded', 0):,} "
            f"| {h.get('exported_spans', 0):,} ({row.acknowledged_spans:,}) / {h.get('dropped_spans', 0):,} "
            f"| {h.get('dropped_requests', 0):,} | {row.plain.p50_ms} → {run.p50_ms} "
            f"| {run.before.rss_mib:.1f} → {run.after.rss_mib:.1f} | {run.before.fds} → {run.after.fds} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Every fault once, its table on stdout: ``python -m tests.support.fault_matrix --seconds 3``."""
    import argparse

    parser = argparse.ArgumentParser(
        description="The fault matrix on the small instrumented app (docs/reliability.md)."
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="load per fault, after 100 warm-up requests")
    args = parser.parse_args()
    plain: dict[tuple[Shape, tuple[Probe, ...]], Run] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="perfkit-faults-") as work:
        for index, fault in enumerate(FAULTS):
            key = (fault.shape, fault.probes)
            if key not in plain:
                plain[key] = plain_run(fault.shape, fault.probes, Path(work) / f"plain-{len(plain)}", args.seconds)
            rows.append(measure(fault, Path(work) / f"fault-{index}", plain[key], args.seconds))
            print(f"{fault.name}: {rows[-1].run.health}", file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
