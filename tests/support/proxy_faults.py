"""The fault matrix on the real LiteLLM proxy under ``perfkit run`` (2 workers):
the same faults, load, probes and counts as tests/support/fault_matrix.py,
with the proxy in place of the small app.

The ground truth for the requests counted is uvicorn's access log, one
line per request served (the load's, the probes', and the launcher's health
checks), outside perfkit. perfkit's counts are the workers' health files, in the
snapshot directory ``perfkit run`` made (read from the proxy's environment).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from litellm_perfkit._bench import CONFIG_TEMPLATE
from litellm_perfkit._bench._launch import Children, LiteLLMProxy, start_litellm, start_mock
from litellm_perfkit._export._health import FIELDS
from litellm_perfkit._wire._environment_variables import PERFKIT_PROMETHEUS_DIR
from tests.support.fault_matrix import EXPORT_TIMEOUT_MS, Fault, Usage, _children, _state, agents_of, load, usage
from tests.support.litellm_env import litellm_python
from tests.support.otlp_faults import faulty_receiver
from tests.support.probes import Answer, send

__all__ = ["ProxyRun", "proxy_run", "workers_of"]

# The proxy's own per-request headers (ids, timings, the upstream's stamps it passes on), and
# those naming the mock's port (each run starts its own).
_VOLATILE_HEADER = re.compile(
    rb"^(x-litellm-(call-id|response-duration-ms|overhead-duration-ms|response-cost.*|model-id|model-api-base)"
    rb"|llm_provider-.*)$"
)


_ACCESS_LINE = re.compile(r'^INFO: +[\d.]+:\d+ - "[A-Z]+ \S+ HTTP/1\.1" \d+', re.M)


@dataclass
class ProxyRun:
    sent: int  # by the load driver and the probes
    served: int  # in uvicorn's access log: those, and the launcher's health checks
    answers: list[Answer]
    load: dict[str, Any]
    before: list[Usage]  # per worker
    after: list[Usage]
    health: dict[str, int] = field(default_factory=dict)
    acknowledged_spans: int = 0
    left: list[int] = field(default_factory=list)  # processes of the proxy's tree still there after it exited
    zombies: int = 0
    log: str = ""

    @property
    def p50_ms(self) -> str:
        latency = self.load["summary"]["latency_ms"]
        return f"{latency['p50']:.1f}" if latency and self.load["summary"]["ok"] else "—"


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def workers_of(supervisor: int) -> list[int]:
    return [pid for pid in _children(supervisor) if b"spawn_main" in _command(pid)]


def _masked(answer: Answer) -> Answer:
    headers = tuple((name, b"" if _VOLATILE_HEADER.match(name) else value) for name, value in answer.headers)
    return Answer(answer.status_line, headers, answer.body)


def _snapshot_dir(pid: int) -> Path | None:
    for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name.decode() == PERFKIT_PROMETHEUS_DIR:
            return Path(value.decode())
    return None


@contextlib.contextmanager
def _proxy(version: str, upstream: str, workdir: Path, endpoint: str | None) -> Iterator[LiteLLMProxy]:
    bin_dir = litellm_python(version).parent
    with Children() as children:
        yield start_litellm(
            children,
            bin_dir / "litellm",
            bin_dir / "perfkit",
            CONFIG_TEMPLATE.replace("{upstream}", upstream),
            workdir,
            workers=2,
            mode="plain" if endpoint is None else "perfkit",
            perfkit_args=() if endpoint is None else ("--endpoint", endpoint, "--protocol", "http/json"),
            env={
                "PERFKIT_RECORD_RATE": "all",
                "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_EXPORTER_OTLP_TIMEOUT": str(EXPORT_TIMEOUT_MS),
            },
            # uvicorn kills a worker that has not answered its health check in 5 s,
            # and importing LiteLLM takes longer on a busy 2-core machine.
            litellm_args=("--timeout_worker_healthcheck", "120"),
        )


def _kill_an_agent(supervisor: int, after_s: float) -> None:
    time.sleep(after_s)
    for worker in workers_of(supervisor)[:1]:
        for agent in agents_of(worker):
            os.kill(agent, signal.SIGKILL)


def proxy_run(version: str, fault: Fault, workdir: Path, seconds: float, plain: bool = False) -> ProxyRun:
    """One proxy (plain, or under perfkit run exporting to a backend failing as ``fault`` says) under load."""
    workdir.mkdir(parents=True, exist_ok=True)
    shape = fault.shape
    with (
        Children() as children,
        faulty_receiver("ok" if fault.backend == "down" else fault.backend) as receiver,
    ):
        if fault.backend == "down":
            receiver.stop()
        upstream = start_mock(children, "--ttft-ms", "5", "--itl-ms", "1", "--chunks", "10", *shape.upstream)
        with _proxy(version, upstream, workdir, None if plain else receiver.url) as proxy:
            supervisor = proxy.pid
            snapshots = None if plain else _snapshot_dir(supervisor)
            warmup = load(proxy.url, shape, requests=shape.warmup)
            before = [usage(worker) for worker in workers_of(supervisor)]
            actor = None
            if fault.during == "kill agent" and not plain:
                actor = threading.Thread(target=_kill_an_agent, args=(supervisor, seconds / 3), daemon=True)
                actor.start()
            result = load(proxy.url, shape, seconds=seconds)
            host, port = proxy.url.removeprefix("http://").split(":")
            answers = [_masked(send(host, int(port), probe)) for probe in fault.probes]
            if actor is not None:
                actor.join()
            time.sleep(1.5)  # a killed agent is replaced at the next drain that has records
            after = [usage(worker) for worker in workers_of(supervisor)]
            zombies = sum(
                1 for worker in [supervisor, *workers_of(supervisor)] for c in _children(worker) if _state(c) == "Z"
            )
            tree = [supervisor, *workers_of(supervisor)] + [a for w in workers_of(supervisor) for a in agents_of(w)]
            os.kill(supervisor, signal.SIGTERM)  # the supervisor alone, as a container stop does
            proxy.child.process.wait(90)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(_state(pid) is not None for pid in tree[1:]):
                time.sleep(0.1)
            log = Path(proxy.child.log.name).read_text(errors="replace")
        run = ProxyRun(
            int(warmup["summary"]["requests"]) + int(result["summary"]["requests"]) + len(fault.probes),
            len(_ACCESS_LINE.findall(log)),
            answers,
            result,
            before,
            after,
            acknowledged_spans=receiver.acknowledged_spans,
            left=[pid for pid in tree[1:] if _state(pid) is not None],
            zombies=zombies,
            log=log,
        )
    if snapshots is not None:
        totals = dict.fromkeys(FIELDS, 0)
        for path in snapshots.glob("*.health"):
            counts = orjson.loads(path.read_bytes())
            for name in FIELDS:
                totals[name] += int(counts.get(name, 0))
        run.health = totals
    return run


def main() -> None:
    """``python -m tests.support.proxy_faults --version 1.103.0``: the rows of
    tests/litellm/test_fault_matrix.py as a table (docs/reliability.md)."""
    import argparse
    import tempfile

    from tests.support.fault_matrix import FAULTS

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--version", default="1.103.0")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    chosen = ("none (backend up)", "backend down", "backend hung", "export agent SIGKILLed")
    print(
        "| fault | answers as plain | served / counted / recorded | spans exported (acked) / dropped "
        "| requests dropped | p50 ms plain → perfkit | worker RSS MiB before → after | processes left |"
    )
    print("|" + "---|" * 8)
    with tempfile.TemporaryDirectory(prefix="perfkit-proxy-faults-") as work:
        plain = proxy_run(args.version, FAULTS[0], Path(work) / "plain", args.seconds, plain=True)
        for index, fault in enumerate(f for f in FAULTS if f.name.startswith(chosen)):
            run = proxy_run(args.version, fault, Path(work) / str(index), args.seconds)
            h = run.health
            rss = ", ".join(f"{b.rss_mib:.0f} → {a.rss_mib:.0f}" for b, a in zip(run.before, run.after))
            print(
                f"| {fault.name} | {'yes' if run.answers == plain.answers else 'NO'} "
                f"| {run.served:,} / {h.get('requests', 0):,} / {h.get('recorded', 0):,} "
                f"| {h.get('exported_spans', 0):,} ({run.acknowledged_spans:,}) / {h.get('dropped_spans', 0):,} "
                f"| {h.get('dropped_requests', 0):,} | {plain.p50_ms} → {run.p50_ms} | {rss} "
                f"| {len(run.left) + run.zombies} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
