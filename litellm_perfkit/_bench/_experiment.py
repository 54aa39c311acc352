"""``perfkit bench``: the whole proxy-overhead experiment in one call.

1. start the mock provider, measure it directly (the baseline);
2. per target (a LiteLLM version, a worker count): start the proxy under
   ``perfkit run`` with an embedded config, exporting to an embedded OTLP
   receiver; warm up, run a non-streaming and a streaming phase
   (``--repeats`` times), join the proxy's spans to the driver's records by
   trace id; stop it;
3. stop everything and return the result document (``perfkit.bench/1``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

from .._executables import find_executable
from .._profile import FlamegraphOptions, ProfileError, start_recording, stop_recording
from .._stop import signal_name
from .._version import __version__
from ..types import BenchResult, BenchRun, LoadResult, LoadSummary
from ._analysis import requests_cpu_per_request, stage_breakdown
from ._by_key import by_key, compare_keys
from ._deploy import DeployError
from ._deploy import preflight as deployment_preflight
from ._deployed import deployment_info, target_deployment, with_virtual_key
from ._headline import perfkit_cost, plain_headline_refused
from ._headline import repeat as interleaved_repeat
from ._instances import (
    EXPORT_DELAY_MS,
    Instance,
    PhaseCpu,
    answered,
    instances_usage,
    proxy_bin,
    start_instances,
    start_proxy,
)
from ._launch import Child, Children, ProxyMode
from ._options import CANNOT_STREAM, PROVIDERS, RATE_LIMITED_DEPLOYMENTS, BenchError, BenchOptions
from ._phases import PHASES, SPANS_WAIT_S, add_samples, phase, received, records, set_up
from ._rate_limits import Send, rate_limits
from ._receiver import SpanReceiver
from ._summary import Idle, Repeat, Samples, summarize

__all__ = ["run_bench"]

# Each worker ships its tally every export delay; perfkit's Prometheus page reads the snapshots within a second.
TALLY_WAIT_S = EXPORT_DELAY_MS / 1000 + 1.5


def preflight(options: BenchOptions) -> None:
    """Everything the bench will need, checked before it spends minutes: one line on what is missing."""
    if options.driver == "locust" and find_executable("locust") is None:
        raise BenchError("--driver locust needs Locust: pip install 'litellm_perfkit[locust]'")
    if options.flamegraph != "off" and find_executable("py-spy") is None:
        raise BenchError("--flamegraph needs py-spy: pip install 'litellm_perfkit[profile]'")
    if options.provider not in PROVIDERS:
        raise BenchError(f"provider {options.provider!r}: use one of {', '.join(sorted(PROVIDERS))}")
    if options.provider in CANNOT_STREAM:
        options.say(
            f"note: LiteLLM cannot stream through {options.provider}; the streaming phase will count its errors"
        )
    if options.instances > 1 and (options.proxy_url or options.proxy_command):
        raise BenchError(
            "--instances starts LiteLLM proxies: use it with --litellm-version or the LiteLLM installed here"
        )
    if options.driver == "locust" and (options.instances > 1 or options.deployment != "plain"):
        raise BenchError(
            "--instances and --deployment spread the load and interleave the keys in perfkit's own driver: drop --driver locust"
        )
    if (
        options.scenario == "rate-limited-deployments"
        and options.instances > 1
        and options.deployment != "postgres+redis"
    ):
        raise BenchError(
            "--scenario rate-limited-deployments with --instances shares its rpm counters through Redis: "
            "add --deployment postgres+redis"
        )
    if options.scenario != "fake-endpoint" and (options.config or options.proxy_url or options.proxy_command):
        raise BenchError("--scenario sets the embedded config: drop --config, --proxy-url and --proxy-command")
    if options.deployment != "plain":
        if not options.litellm_versions or options.proxy_url or options.proxy_command:
            raise BenchError(
                f"--deployment {options.deployment} prepares the database client of a LiteLLM perfkit installs: "
                "use it with --litellm-version (not --proxy-url or --proxy-command)"
            )
        try:
            deployment_preflight(options.deployment)
        except DeployError as exc:
            raise BenchError(str(exc)) from None
    if not (options.proxy_url or options.proxy_command or options.litellm_versions):
        proxy_bin(None)


def run_bench(options: BenchOptions) -> BenchResult:
    """The experiment. A stop signal (Ctrl-C, SIGTERM, SIGHUP) ends it early:
    the document then holds the runs and repeats finished until then, marked
    incomplete; with none finished, the signal goes on."""
    preflight(options)
    started = time.time()
    runs: list[BenchRun] = []
    stop: KeyboardInterrupt | None = None
    with set_up(options, "perfkit-bench-") as (workdir, receiver, children, upstream):
        direct = _direct(upstream, options)
        for target, version in _targets(options):
            for workers in options.workers:
                repeats: list[Repeat] = []
                try:
                    flamegraph, idle, extras = _target(
                        children, options, target, version, workers, upstream, receiver, workdir, repeats
                    )
                except KeyboardInterrupt as exc:
                    stop = exc
                    if repeats:
                        runs.append(summarize(target, version, workers, direct, repeats, None, None))
                    break
                runs.append({**summarize(target, version, workers, direct, repeats, flamegraph, idle), **extras})
            if stop is not None:
                break
    if not runs:
        if stop is not None:
            raise stop
        raise BenchError("no run was measured")
    document = cast(
        BenchResult,
        {
            "schema": "perfkit.bench/1",
            "complete": stop is None,
            "label": options.label,
            "tool": {"name": "perfkit bench", "version": __version__},
            "created_unix": int(started),
            "duration_s": round(time.time() - started, 1),
            "config": options.recorded(),
            **runs[0],  # the first run's fields at the top (BenchResult extends BenchRun)
        },
    )
    if len(runs) > 1:
        document["runs"] = runs
    if stop is not None:
        document["stopped_by"] = signal_name(stop)
    return document


def _direct(upstream: str, options: BenchOptions) -> dict[str, LoadSummary]:
    """The baseline: the mock measured without the proxy."""
    direct = {}
    for name, stream in PHASES:
        options.say(f"direct to the mock, {name} ({options.direct_duration_s:g} s)")
        direct[name] = phase(
            upstream, stream, options.direct_duration_s, (min(1.0, options.direct_duration_s), 0), options
        )["summary"]
    return direct


def _targets(options: BenchOptions) -> list[tuple[str, str | None]]:
    """(label, litellm version or None) per sweep entry."""
    if options.proxy_url or options.proxy_command:
        return [("custom gateway", None)]
    if options.litellm_versions:
        return [(f"litellm {v}", v) for v in options.litellm_versions]
    return [("litellm (installed)", None)]


def _target(
    children: Children,
    options: BenchOptions,
    target: str,
    version: str | None,
    workers: int,
    upstream: str,
    receiver: SpanReceiver,
    workdir: Path,
    repeats: list[Repeat],
) -> tuple[str | None, Idle | None, BenchRun]:
    """One target measured ``options.repeats`` times, each finished repeat
    appended to ``repeats``, then idle, in its deployment; the flamegraph's
    path, when one was asked for, the idle phase, and the run's fields beside
    the summary's: the deployment's record, the keys compared, the instances
    and the rate limits, each when it applies."""
    instances: list[Instance] = []
    plain: Instance | None = None
    proxy_start_s = None
    refused = plain_headline_refused(options)
    if refused:
        options.say(f"note: the headline comes from the recorded proxy: {refused} (--headline recorded)")
    extras: BenchRun = {"headline": "recorded" if refused or options.headline == "recorded" else "plain"}  # type: ignore[typeddict-item]
    with target_deployment(options, version) as deployment:
        if options.proxy_url:
            url = options.proxy_url.rstrip("/")
        else:
            count = f"{options.instances} instances" if options.instances > 1 else "1 instance"
            twin = ", and its plain twin" if extras["headline"] == "plain" else ""
            options.say(f"starting {target}, {count} with {workers} worker(s) each{twin}")
            started = time.monotonic()

            def start(index: int) -> Instance:
                mode: ProxyMode = "perfkit" if index < options.instances else "plain"
                return start_proxy(
                    children, options, version, workers, upstream, receiver.endpoint, workdir, deployment, mode
                )

            instances = start_instances(options.instances + (extras["headline"] == "plain"), start)
            if extras["headline"] == "plain":
                plain = instances.pop()
            proxy_start_s = time.monotonic() - started
            url = instances[0].url
            options = with_virtual_key(options, url, deployment)
        proxies = [i.child for i in instances]
        ports = tuple(i.port for i in instances[1:])
        flamegraph = None
        for repeat in range(options.repeats):
            receiver.clear()
            recording = (
                _start_flamegraph(options, proxies[0] if proxies else None, target, workers) if repeat == 0 else None
            )
            try:
                if plain is None:
                    run = _repeat(url, options, receiver, workdir, proxies, ports)
                else:
                    run = interleaved_repeat(instances[0], plain, options, receiver, workdir)
            except BaseException:  # Ctrl-C or a failed phase: py-spy runs in its own session
                if recording is not None:
                    recording[0].kill()
                raise
            if recording is not None:
                flamegraph = _stop_flamegraph(options, *recording)
            repeats.append(run)
        idle = _idle(url, options, receiver, workdir) if options.idle_s > 0 else None
        if any(i.metrics_port is not None for i in instances):
            time.sleep(TALLY_WAIT_S)
            extras["instances"] = answered(instances)
        if options.deployment != "plain":
            served = sum(n for i in extras.get("instances", []) for s, n in i["answered"].items() if s == "200")
            extras["deployment"] = deployment_info(deployment, proxy_start_s, answered=served)
        if options.api_keys:
            extras["keys"] = compare_keys([r["by_key"] for r in repeats if "by_key" in r])
        if options.scenario == "rate-limited-deployments":
            sends = [send for r in repeats for send in r.get("sends", [])]
            users = max(options.concurrency, options.stream_concurrency)
            extras["rate_limits"] = rate_limits(sends, RATE_LIMITED_DEPLOYMENTS, options.rpm, users)
        if plain is not None:
            extras["perfkit_cost"] = perfkit_cost(repeats)
            children.stop(plain.child)
        for proxy in proxies:
            children.stop(proxy)
    return flamegraph, idle, extras


def _idle(url: str, options: BenchOptions, receiver: SpanReceiver, workdir: Path) -> Idle:
    """What one request pays on a proxy with nothing else to do: one user, no queueing."""
    options.say(f"proxy, idle phase ({options.idle_s:g} s, 1 user)")
    receiver.clear()
    jsonl = workdir / f"idle-{time.monotonic_ns()}.jsonl"
    result = phase(url, False, options.idle_s, (min(1.0, options.idle_s), 0), options, str(jsonl), concurrency=1)
    sent = records(jsonl)
    time.sleep(SPANS_WAIT_S)
    trace_ids = {r["trace_id"] for r in sent}
    breakdown = stage_breakdown(received(receiver, options, trace_ids), trace_ids)
    return {"summary": result["summary"], "breakdown": breakdown}


def _repeat(
    url: str, options: BenchOptions, receiver: SpanReceiver, workdir: Path, proxies: list[Child], ports: tuple[int, ...]
) -> Repeat:
    """Both phases once, with the proxies' CPU over them, joined to the spans they produced."""
    cpu_before, _ = instances_usage(proxies)
    sends: list[Send] = []
    started = time.monotonic()
    phases: dict[str, LoadResult] = {}
    per_request: dict[str, float] = {}
    agent_per_request: dict[str, float] = {}
    phase_ids: dict[str, set[str]] = {}
    samples: Samples = {"nonstream_latency_ms": [], "stream_ttft_ms": [], "stream_e2e_ms": []}
    for name, stream in PHASES:
        jsonl = workdir / f"{name}-{time.monotonic_ns()}.jsonl"
        options.say(
            f"proxy, {name} phase ({options.duration_s:g} s, {options.stream_concurrency if stream else options.concurrency} users)"
        )
        warmup = (options.warmup_s, options.warmup_requests)
        cpu, agent = PhaseCpu(proxies, warmup), PhaseCpu(proxies, warmup, agents="only")
        measured_from = time.time() + options.warmup_s
        phases[name] = phase(url, stream, options.duration_s, warmup, options, str(jsonl), instance_ports=ports)
        requests = phases[name]["summary"]["requests"]
        cpu_ms, agent_ms = cpu.per_request_ms(requests), agent.per_request_ms(requests)
        if cpu_ms is not None:
            per_request[name] = cpu_ms
        if agent_ms is not None:
            agent_per_request[name] = agent_ms
        sent = records(jsonl)
        phase_ids[name] = {r["trace_id"] for r in sent}
        sends += [(measured_from + r["intended_ms"] / 1000, r["status"]) for r in sent]
        add_samples(samples, sent, stream)
    wall = time.monotonic() - started
    cpu_after, rss = instances_usage(proxies)
    time.sleep(SPANS_WAIT_S)
    trace_ids = set().union(*phase_ids.values())
    spans = received(receiver, options, trace_ids)
    own_cpu, named_cpu = requests_cpu_per_request(spans, phase_ids)
    run: Repeat = {
        "nonstream": phases["nonstream"],
        "stream": phases["stream"],
        "samples": samples,
        "proxy": {
            "cpu_percent": round((cpu_after - cpu_before) / wall * 100, 1) if proxies else None,
            "rss_mb": round(rss, 1) if proxies else None,
            "cpu_ms_per_request": per_request or None,
            "steps_cpu_ms_per_request": own_cpu,
            "named_cpu_ms_per_request": named_cpu,
            "agent_cpu_ms_per_request": agent_per_request or None,
        },
        "breakdown": stage_breakdown(spans, trace_ids),
        "sends": sends,
    }
    if options.api_keys:
        run["by_key"] = by_key(spans, trace_ids)
    return run


def _start_flamegraph(options: BenchOptions, proxy: Child | None, target: str, workers: int) -> tuple[Any, str] | None:
    """py-spy on the proxy and its workers, non-blocking (it does not pause them to sample)."""
    if options.flamegraph == "off" or proxy is None:
        return None
    slug = "".join(c if c.isalnum() or c in ".-" else "-" for c in target)
    suffix = "speedscope.json" if options.flamegraph == "speedscope" else "svg"
    output = str(Path(f"{options.flamegraph_prefix}.{slug}.w{workers}.{suffix}").resolve())
    flamegraph = FlamegraphOptions(
        output=output, format=options.flamegraph, sample_hz=50, subprocesses=True, nonblocking=True
    )
    try:
        return start_recording(flamegraph, proxy.process.pid), output
    except ProfileError as exc:
        raise BenchError(f"--flamegraph: {exc}") from None


def _stop_flamegraph(options: BenchOptions, process: Any, output: str) -> str:
    try:
        path = stop_recording(process, output)
    except ProfileError as exc:
        raise BenchError(f"--flamegraph: {exc}") from None
    options.say(f"flamegraph of the proxy: {path}")
    return str(path)
