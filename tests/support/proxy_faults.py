"""The fault matrix on the real LiteLLM proxy under ``perfkit run`` (2 workers),
one proxy per version for every row: the OTLP backend's faults are switched
on the receiver between rows, and each upstream fault is a model of its own
in the proxy's config, routed to a ``perfkit mock`` that fails that way.

The same rows run first through the same proxy without perfkit (the same
mocks on the same ports), which gives each row's reference answers and
latency. Per row: ``perfkit load`` for a few seconds, then fixed probes.

The ground truth for the requests served is uvicorn's access log, one line
per request (the load's, the probes', and the launcher's health checks),
outside perfkit. perfkit's counts are the workers' health files at exit, in
the snapshot directory ``perfkit run`` made (read from the proxy's
environment); per row, the drops are read from the metric snapshots there.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from litellm_perfkit._bench._launch import Children, LiteLLMProxy, free_port, port_open
from litellm_perfkit._bench._options import MASTER_KEY, MODEL
from litellm_perfkit._export._health import FIELDS
from litellm_perfkit._export._prometheus import merged
from litellm_perfkit._wire._environment_variables import PERFKIT_PROMETHEUS_DIR
from litellm_perfkit._wire._names import Metric
from tests.support.fault_matrix import (
    EXPORT_TIMEOUT_MS,
    Backend,
    Shape,
    Usage,
    act_mid_run,
    load,
    median_ms,
)
from tests.support.fault_matrix import usage as usage_of
from tests.support.otlp_faults import FaultyReceiver, faulty_receiver
from tests.support.polling import wait_until
from tests.support.probes import HOSTILE, Answer, Probe, send, send_past_refusals
from tests.support.procfs import agents_of, environment, state, workers_of, zombies_of
from tests.support.proxy import launched_proxy

__all__ = ["ROWS", "MatrixRun", "ProxyFault", "ProxyPass", "RowResult", "matrix_run", "table", "workers_of"]

# Each upstream fault is a model routed to its own mock: (mock flags, extra litellm_params lines).
UPSTREAMS: dict[str, tuple[tuple[str, ...], str]] = {
    MODEL: (("--ttft-ms", "5", "--itl-ms", "1", "--chunks", "10"), ""),
    # 10 chunks 100 ms apart: a client that gives up at 0.5 s leaves mid-stream.
    "slow-stream": (("--ttft-ms", "5", "--itl-ms", "100", "--chunks", "10"), ""),
    # One content chunk: each stream is cut, or has its malformed event, at the same place. The
    # cut comes 1 s after the opening (role) event: aiohttp's StreamReader raises a connection's
    # error before the data it holds, so an event read in the same loop turn as the cut is lost,
    # and whether LiteLLM then answers 200 or 500 would be left to the timing of its reads.
    "resets": (("--disconnect-fraction", "1", "--chunks", "1", "--ttft-ms", "1000"), ""),
    "stalls": (("--timeout-fraction", "1"), "      timeout: 0.5\n"),
    "malformed": (("--malformed-fraction", "1", "--chunks", "1"), ""),
}
During = Literal["nothing", "restart backend", "kill agent"]
Ending = Literal["exported", "dropped"]  # what the row's own records come to: delivered, or counted dropped


@dataclass(frozen=True)
class ProxyFault:
    name: str
    model: str = MODEL
    backend: Backend = "ok"
    during: During = "nothing"
    stream: bool = True
    client_timeout_s: float = 30.0
    hostile: bool = False

    @property
    def shape(self) -> Shape:
        return Shape(stream=self.stream, client_timeout_s=self.client_timeout_s, model=self.model)

    @property
    def ending(self) -> Ending:
        """A killed agent loses what it held, if anything (counted at exit): the rest is delivered."""
        return "exported" if self.backend == "ok" and self.during in ("nothing", "kill agent") else "dropped"

    def probes(self) -> tuple[Probe, ...]:
        chat = '{"model":"%s","messages":[{"role":"user","content":"probe"}]%s}'
        base = (
            Probe("json", body=(chat % (self.model, "")).encode()),
            Probe("stream", body=(chat % (self.model, ',"stream":true')).encode()),
        )
        return base + HOSTILE if self.hostile else base


# Healthy-backend rows first (each one's spans are all delivered, checked per row), then the
# backend's faults, each switched on at the row's start and left to the next row (an export the
# backend took as it was cut can be delivered late, or twice: no healthy row comes after them).
ROWS = (
    ProxyFault("none (backend up)"),
    ProxyFault("clients disconnect mid-stream", model="slow-stream", client_timeout_s=0.5),
    ProxyFault("upstream resets mid-stream", model="resets"),
    ProxyFault("upstream stalls (proxy gives up at 0.5 s)", model="stalls", stream=False),
    ProxyFault("upstream sends malformed SSE", model="malformed"),
    ProxyFault("hostile requests (64 KB headers, 10,000 headers, bad UTF-8, bad traceparent)", hostile=True),
    ProxyFault("export agent SIGKILLed mid-run", during="kill agent"),
    ProxyFault("backend slow (2 s per export)", backend="slow"),
    ProxyFault("backend answers 503", backend="5xx"),
    ProxyFault("backend answers 429 (Retry-After: 1)", backend="429"),
    ProxyFault("backend hung (accepts, never answers)", backend="hung"),
    ProxyFault("backend down (connection refused)", backend="down"),
    ProxyFault("backend restarted mid-run", during="restart backend"),
)

_VOLATILE_HEADER = re.compile(
    rb"^(x-litellm-(call-id|response-duration-ms|overhead-duration-ms|response-cost.*)|llm_provider-.*)$"
)
# LiteLLM's timeout message says how long the call took.
_VOLATILE_BODY = re.compile(rb"time taken=[\d.]+ seconds")
_ACCESS_LINE = re.compile(r'^INFO: +[\d.]+:\d+ - "[A-Z]+ \S+ HTTP/1\.1" \d+', re.M)


@dataclass
class RowResult:
    fault: ProxyFault
    answers: list[Answer]
    load: dict[str, Any]
    served: int  # access-log lines during the row
    request_spans: dict[str, int] = field(default_factory=dict)  # delivered during the row, by error.type
    dropped: int = 0  # spans and requests counted dropped during the row (metric snapshots)
    settled_s: float | None = None  # until the row's records were delivered or counted dropped; None: not in 30 s

    @property
    def p50_ms(self) -> str:
        return median_ms(self.load)

    @property
    def sent(self) -> int:
        """By the load driver and the probes. uvicorn logs no request whose client left before
        the answer began, and rejects some hostile ones before the app: ``served`` can be fewer."""
        return int(self.load["summary"]["requests"]) + len(self.answers)


@dataclass
class ProxyPass:
    rows: list[RowResult]
    served: int  # every access-log line
    before: list[Usage]  # per worker, after the warm-up
    after: list[Usage]
    health: dict[str, int] = field(default_factory=dict)  # summed over the workers' health files
    acknowledged_spans: int = 0
    left: list[int] = field(default_factory=list)  # of the proxy's tree, 10 s after its SIGTERM
    zombies: int = 0
    supervisor_agents: int = 0
    log: str = ""


@dataclass
class MatrixRun:
    version: str
    plain: ProxyPass
    perfkit: ProxyPass


def _masked(answer: Answer) -> Answer:
    """The answer less what two runs of the same request differ by: call ids, durations, costs."""
    headers = tuple((name, b"" if _VOLATILE_HEADER.match(name) else value) for name, value in answer.headers)
    body = _VOLATILE_BODY.sub(b"time taken=0 seconds", answer.body)
    if int(answer.status_line.split(b" ", 2)[1]) >= 500:
        # LiteLLM's error text quotes what failed (a malformed chunk's position, a duration),
        # which differs between two runs of the same fault: its digits are not compared.
        body = re.sub(rb"\d", b"0", body)
    return Answer(answer.status_line, headers, body)


def _answer(host: str, port: int, probe: Probe) -> Answer:
    """The probe's answer (past uvicorn's refusals, which come before any app), masked."""
    answer = send_past_refusals(host, port, probe)
    return _masked(answer)


def _answers(host: str, port: int, fault: ProxyFault) -> list[Answer]:
    """The row's probes, masked, in their order: its two chat requests together (a stalled
    upstream holds each for LiteLLM's retries, 6 s on a 2-core machine, which one after the
    other doubled), then the hostile ones one at a time, as uvicorn reads each head alone."""
    chat, hostile = fault.probes()[:2], fault.probes()[2:]
    with ThreadPoolExecutor(len(chat)) as pool:
        answers = list(pool.map(lambda probe: _answer(host, port, probe), chat))
    return answers + [_answer(host, port, probe) for probe in hostile]


def _snapshot_dir(pid: int) -> Path | None:
    directory = environment(pid, PERFKIT_PROMETHEUS_DIR)
    return None if directory is None else Path(directory)


def _config(ports: dict[str, int]) -> str:
    entries = "".join(
        f"  - model_name: {model}\n    litellm_params:\n      model: openai/fake\n"
        f"      api_base: http://127.0.0.1:{ports[model]}/v1\n      api_key: fake-key\n{extra}"
        for model, (_, extra) in UPSTREAMS.items()
    )
    return f"model_list:\n{entries}general_settings:\n  master_key: {MASTER_KEY}\n"


@contextlib.contextmanager
def _mocks(ports: dict[str, int]) -> Iterator[None]:
    """Every route's mock, started together (each imports perfkit's CLI first), then each waited for."""
    with Children() as children:
        started = {
            model: children.start(
                f"mock-{model}",
                [sys.executable, "-m", "litellm_perfkit._cli", "mock", "--port", str(ports[model]), *flags],
            )
            for model, (flags, _) in UPSTREAMS.items()
        }
        for model, child in started.items():
            child.wait_ready(functools.partial(port_open, ports[model]), timeout_s=30)
        yield


def _proxy(
    version: str, ports: dict[str, int], workdir: Path, endpoint: str | None
) -> contextlib.AbstractContextManager[LiteLLMProxy]:
    return launched_proxy(
        version,
        None,
        workdir,
        config=_config(ports),
        workers=2,
        mode="plain" if endpoint is None else "perfkit",
        perfkit_args=() if endpoint is None else ("--endpoint", endpoint, "--protocol", "http/json"),
        env={
            "PERFKIT_RECORD_RATE": "all",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_EXPORTER_OTLP_TIMEOUT": str(EXPORT_TIMEOUT_MS),
        },
        timeout_s=600,  # two workers importing LiteLLM on a busy 2-core machine
    )


def _set_backend(receiver: FaultyReceiver, backend: Backend) -> None:
    if backend == "down":
        receiver.stop()
        return
    if receiver._server is None:
        receiver.start()
    receiver.switch(backend)


def _dropped(snapshots: Path | None) -> int:
    if snapshots is None:
        return 0
    counters = merged(str(snapshots))[1]
    return counters.get(Metric.SPANS_DROPPED, 0) + counters.get(Metric.REQUESTS_DROPPED, 0)


def _served(log: Path) -> int:
    return len(_ACCESS_LINE.findall(log.read_text(errors="replace")))


def _until_quiet(count: Callable[[], int], quiet_s: float = 1.0) -> None:
    """Until ``count()`` (request spans the receiver took) has not grown for ``quiet_s``, asked every
    0.2 s: no drain (the agents drain every 200 ms) brought any in that long. One sample a second
    until two were equal waited for the same quiet second, and up to a second more."""
    seen, since = count(), time.monotonic()
    while time.monotonic() - since < quiet_s:
        time.sleep(0.2)
        now = count()
        if now != seen:
            seen, since = now, time.monotonic()


def _settle(
    row: RowResult, receiver: FaultyReceiver, delivered: dict[str, int], snapshots: Path | None, dropped: int
) -> None:
    """Wait until the row's records were delivered (a healthy backend) or drops were counted (a fault)."""

    def arrived() -> dict[str, int]:
        now = dict(receiver.request_errors)
        return {k: v - delivered.get(k, 0) for k, v in now.items() if v > delivered.get(k, 0)}

    if row.fault.ending == "exported":
        row.settled_s = wait_until(lambda: sum(arrived().values()) >= row.served, 30)
        _until_quiet(lambda: sum(arrived().values()))  # requests the access log missed come in the same drains
    else:
        row.settled_s = wait_until(lambda: _dropped(snapshots) > dropped, 30)
    row.request_spans, row.dropped = arrived(), _dropped(snapshots) - dropped


def _one_pass(
    version: str, ports: dict[str, int], workdir: Path, receiver: FaultyReceiver | None, seconds: float
) -> ProxyPass:
    workdir.mkdir(parents=True, exist_ok=True)
    with _proxy(version, ports, workdir, receiver.url if receiver else None) as proxy:
        supervisor, log = proxy.pid, Path(proxy.child.log.name)
        snapshots = _snapshot_dir(supervisor) if receiver else None
        host, port = proxy.url.removeprefix("http://").split(":")
        for model in UPSTREAMS:  # each route's first request, outside the rows
            send(host, int(port), ProxyFault("warm", model=model).probes()[0])
        load(proxy.url, Shape(), requests=100)
        if receiver is not None:  # the warm-up's spans in before the first row counts its own
            warmed = _served(log)
            wait_until(lambda: sum(receiver.request_errors.values()) >= warmed, 30)
            _until_quiet(lambda: sum(receiver.request_errors.values()))
        before = [usage_of(worker) for worker in workers_of(supervisor)]
        rows: list[RowResult] = []
        for fault in ROWS:
            same = [r for r in rows if (r.fault.shape, r.fault.probes()) == (fault.shape, fault.probes())]
            if receiver is None and same:  # without perfkit, a backend fault is no fault: the same row
                rows.append(same[0])
                continue
            if receiver is not None:
                _set_backend(receiver, fault.backend)
            served, dropped = _served(log), _dropped(snapshots)
            delivered = dict(receiver.request_errors) if receiver else {}
            actor = None
            if receiver is not None and fault.during != "nothing":
                first_workers_agents = lambda: [a for w in workers_of(supervisor)[:1] for a in agents_of(w)]  # noqa: E731
                actor = threading.Thread(
                    target=act_mid_run, args=(fault.during, receiver, first_workers_agents, seconds), daemon=True
                )
                actor.start()
            result = load(proxy.url, fault.shape, seconds=seconds)
            answers = _answers(host, int(port), fault)
            if actor is not None:
                actor.join()
            row = RowResult(fault, answers, result, _served(log) - served)
            if receiver is not None:
                _settle(row, receiver, delivered, snapshots, dropped)
            rows.append(row)
            print(
                f"  {version} {'perfkit' if receiver else 'plain'}: {fault.name}: {row.served} served, "
                f"{row.request_spans} delivered, {row.dropped} dropped",
                file=sys.stderr,
                flush=True,
            )
        if receiver is not None:
            _set_backend(receiver, "ok")
            time.sleep(1.5)  # a killed agent is replaced at the next drain that has records
        workers = workers_of(supervisor)
        after = [usage_of(worker) for worker in workers]
        zombies = sum(len(zombies_of(pid)) for pid in [supervisor, *workers])
        supervisor_agents = len(agents_of(supervisor))
        tree = [*workers, *(agent for worker in workers for agent in agents_of(worker))]
        os.kill(supervisor, signal.SIGTERM)  # the supervisor alone, as a container stop does
        proxy.child.process.wait(90)
        wait_until(lambda: all(state(pid) is None for pid in tree), 10)
        done = ProxyPass(
            rows,
            _served(log),
            before,
            after,
            left=[pid for pid in tree if state(pid) is not None],
            zombies=zombies,
            supervisor_agents=supervisor_agents,
            log=log.read_text(errors="replace"),
        )
    if receiver is not None:
        done.acknowledged_spans = receiver.acknowledged_spans
    if snapshots is not None:
        totals = dict.fromkeys(FIELDS, 0)
        for path in snapshots.glob("*.health"):
            counts = orjson.loads(path.read_bytes())
            for name in FIELDS:
                totals[name] += int(counts.get(name, 0))
        done.health = totals
    return done


def matrix_run(version: str, workdir: Path, seconds: float) -> MatrixRun:
    """Every row, through the proxy without perfkit and then under ``perfkit run``, on the same mocks."""
    ports = {model: free_port() for model in UPSTREAMS}
    with _mocks(ports):
        plain = _one_pass(version, ports, workdir / "plain", None, seconds)
        with faulty_receiver("ok") as receiver:
            perfkit = _one_pass(version, ports, workdir / "perfkit", receiver, seconds)
    return MatrixRun(version, plain, perfkit)


def table(run: MatrixRun) -> str:
    """The rows as Markdown (docs/reliability.md)."""
    lines = [
        "| fault | answers as plain | sent / served | request spans delivered (by error.type) | counted dropped "
        "| p50 ms plain → perfkit |",
        "|" + "---|" * 6,
    ]
    for plain, row in zip(run.plain.rows, run.perfkit.rows):
        spans = ", ".join(f"{k} {v}" for k, v in sorted(row.request_spans.items())) or "0"
        lines.append(
            f"| {row.fault.name} | {'yes' if row.answers == plain.answers else 'NO'} | {row.sent:,} / {row.served:,} "
            f"| {spans} | {row.dropped:,} | {plain.p50_ms} → {row.p50_ms} |"
        )
    return "\n".join(lines)


def totals(run: MatrixRun) -> str:
    h, p = run.perfkit.health, run.perfkit
    rss = ", ".join(f"{b.rss_mib:.0f} → {a.rss_mib:.0f}" for b, a in zip(p.before, p.after))
    fds = ", ".join(f"{b.fds} → {a.fds}" for b, a in zip(p.before, p.after))
    return (
        f"LiteLLM {run.version}: served {p.served:,}, counted {h.get('requests', 0):,}, recorded "
        f"{h.get('recorded', 0):,}; spans exported {h.get('exported_spans', 0):,} (acknowledged "
        f"{p.acknowledged_spans:,}), dropped {h.get('dropped_spans', 0):,}; requests dropped "
        f"{h.get('dropped_requests', 0):,}; internal errors {h.get('internal_errors', 0)}; worker RSS MiB {rss}; "
        f"fds {fds}; zombies {p.zombies}; agents in the supervisor {p.supervisor_agents}; "
        f"processes left 10 s after SIGTERM {len(p.left)}"
    )


def main() -> None:
    """``python -m tests.support.proxy_faults --version 1.103.0``: the rows of
    tests/litellm/test_fault_matrix.py as a table (docs/reliability.md)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--version", default="1.103.0")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perfkit-proxy-faults-") as work:
        run = matrix_run(args.version, Path(work), args.seconds)
    print(table(run))
    print(totals(run))
    for plain, row in zip(run.plain.rows, run.perfkit.rows):
        for answer, reference in zip(row.answers, plain.answers):
            if answer != reference:
                print(f"{row.fault.name}: {answer}\n  plain: {reference}", file=sys.stderr)


if __name__ == "__main__":
    main()
