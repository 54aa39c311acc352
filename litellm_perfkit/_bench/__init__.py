"""``perfkit bench``: the whole proxy-overhead experiment in one call.

1. start the mock provider, measure it directly (the baseline);
2. start the proxy under ``perfkit run`` with an embedded config, exporting
   to an embedded OTLP receiver; wait until healthy;
3. warm up, run a non-streaming and a streaming phase (``--repeats`` times);
4. join the proxy's spans to the driver's records by trace id;
5. stop everything and return the result document (``perfkit.bench/1``).
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from .._executables import find_executable
from .._load import Driver, LoadPlan, LocustError, Workload, WorkloadError, run_load
from .._profile import FlamegraphOptions, ProfileError, start_recording, stop_recording
from .._version import __version__
from ._analysis import stage_breakdown
from ._launch import Child, Children, free_port, port_open, start_litellm, start_mock, tree_usage
from ._receiver import SpanReceiver
from ._venvs import OFFLINE_ENV, VenvError, litellm_python

__all__ = ["BenchOptions", "BenchError", "run_bench", "read_result", "SCHEMA", "CONFIG_TEMPLATE"]

SCHEMA = "perfkit.bench/1"
MODEL = "fake-openai-endpoint"
CONFIG_TEMPLATE = """\
model_list:
  - model_name: fake-openai-endpoint
    litellm_params:
      model: openai/fake
      api_base: {upstream}/v1
      api_key: fake-key
  - model_name: fake-embedding
    litellm_params:
      model: openai/fake-embedding
      api_base: {upstream}/v1
      api_key: fake-key
general_settings:
  master_key: sk-1234
"""


class BenchError(RuntimeError):
    """A bench that cannot run; the message says why and what to do."""


def read_result(path: str) -> dict[str, Any]:
    """A bench result file, checked to be one (BenchError otherwise)."""
    try:
        document = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise BenchError(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError:
        raise BenchError(f"{path} is not JSON") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise BenchError(f"{path} is not a perfkit bench result (schema {SCHEMA})")
    return document


@dataclass(frozen=True)
class BenchOptions:
    litellm_versions: tuple[str, ...] = ()  # empty: the LiteLLM installed beside perfkit
    proxy_command: str | None = None  # with {port} and {upstream}
    proxy_url: str | None = None
    config: str | None = None  # a LiteLLM config; {upstream} is replaced
    workers: tuple[int, ...] = (1,)
    concurrency: int = 20
    stream_concurrency: int = 10
    duration_s: float = 20.0
    direct_duration_s: float = 10.0
    warmup_s: float = 5.0
    repeats: int = 1
    prompt_repeats: int = 150
    ttft_ms: float = 20.0
    itl_ms: float = 2.0
    chunks: int = 20
    label: str = "bench"
    driver: Driver = "perfkit"
    processes: int = 1  # load-driver processes
    flamegraph: Literal["off", "speedscope", "svg"] = "off"  # py-spy on the proxy during the first repeat
    flamegraph_prefix: str = "perfkit-bench"  # files: PREFIX.TARGET.wN.speedscope.json / .svg
    progress: str = "auto"
    log: Any = field(default=sys.stderr, repr=False, compare=False)


def _say(options: BenchOptions, message: str) -> None:
    print(f"perfkit bench: {message}", file=options.log, flush=True)


def _phase(url: str, stream: bool, concurrency: int, duration: float, warmup: float, options: BenchOptions,
           jsonl: str | None = None) -> dict[str, Any]:  # fmt: skip
    workload = Workload(url=url, models=((MODEL, 1.0),), stream=stream, prompt_repeats=options.prompt_repeats)
    plan = LoadPlan(concurrency=concurrency, duration_s=duration, warmup_s=warmup, timeout_s=60)
    try:
        return run_load(workload, plan, processes=options.processes, progress=options.progress,  # type: ignore[arg-type]
                        jsonl_path=jsonl, driver=options.driver)  # fmt: skip
    except (LocustError, WorkloadError) as exc:
        raise BenchError(str(exc)) from None


def _p(summary: dict[str, Any] | None, key: str) -> float | None:
    return None if not summary else summary.get(key)


def _targets(options: BenchOptions) -> list[tuple[str, str | None]]:
    """(label, litellm version or None) per sweep entry."""
    if options.proxy_url or options.proxy_command:
        return [("custom gateway", None)]
    if options.litellm_versions:
        return [(f"litellm {v}", v) for v in options.litellm_versions]
    return [("litellm (installed)", None)]


def _proxy_bin(version: str | None) -> tuple[Path, Path]:
    """(litellm executable, perfkit executable) for a version, or the installed one."""
    if version is not None:
        try:
            python = litellm_python(version)
        except VenvError as exc:
            raise BenchError(str(exc)) from None
        return python.parent / "litellm", python.parent / "perfkit"
    litellm = find_executable("litellm")
    perfkit = find_executable("perfkit")
    if litellm is None:
        raise BenchError(
            "the LiteLLM proxy is not installed here: pip install 'litellm_perfkit[litellm]', "
            "or pass --litellm-version 1.103.0 (builds an isolated venv), --proxy-command or --proxy-url"
        )
    return Path(litellm), Path(perfkit or "perfkit")


def _start_proxy(children: Children, options: BenchOptions, version: str | None, workers: int, upstream: str,
                 receiver: SpanReceiver, workdir: Path) -> tuple[str, Child]:  # fmt: skip
    env = {"OTEL_SERVICE_NAME": "perfkit-bench-proxy"}
    if options.proxy_command:
        port = free_port()
        command = shlex.split(options.proxy_command.format(port=port, upstream=upstream))
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL="http/json")
        proxy = children.start("proxy", command, {**os.environ, **OFFLINE_ENV, **env}, workdir)
        proxy.wait_ready(lambda: port_open(port), timeout_s=180)
        return f"http://127.0.0.1:{port}", proxy
    litellm, perfkit = _proxy_bin(version)
    template = Path(options.config).read_text() if options.config else CONFIG_TEMPLATE
    started = start_litellm(children, litellm, perfkit, template.replace("{upstream}", upstream), workdir, workers=workers,
                            perfkit_args=("--endpoint", receiver.endpoint, "--protocol", "http/json"), env=env)  # fmt: skip
    return started.url, started.child


def _one_run(url: str, options: BenchOptions, receiver: SpanReceiver, workdir: Path, proxy: Child | None) -> dict[str, Any]:
    cpu_before, _ = tree_usage(proxy.process.pid) if proxy else (0.0, 0.0)
    started = time.monotonic()
    phases = {}
    trace_ids: set[str] = set()
    samples: dict[str, list[float]] = {"nonstream_latency_ms": [], "stream_ttft_ms": [], "stream_e2e_ms": []}
    for name, stream, concurrency in (("nonstream", False, options.concurrency), ("stream", True, options.stream_concurrency)):
        jsonl = workdir / f"{name}-{time.monotonic_ns()}.jsonl"
        _say(options, f"proxy, {name} phase ({options.duration_s:g} s, {concurrency} users)")
        phases[name] = _phase(url, stream, concurrency, options.duration_s, options.warmup_s, options, str(jsonl))
        records = [orjson.loads(line) for line in jsonl.read_bytes().splitlines() if line] if jsonl.exists() else []
        trace_ids |= {r["trace_id"] for r in records}
        ok = [r for r in records if r["error"] is None and r["end_ms"] is not None]
        if stream:
            samples["stream_ttft_ms"] += [r["first_token_ms"] for r in ok if r["first_token_ms"] is not None]
            samples["stream_e2e_ms"] += [r["end_ms"] for r in ok]
        else:
            samples["nonstream_latency_ms"] += [r["end_ms"] for r in ok]
    wall = time.monotonic() - started
    cpu_after, rss = tree_usage(proxy.process.pid) if proxy else (0.0, 0.0)
    time.sleep(1.0)  # the export agents flush every 200 ms
    return {
        "phases": phases,
        "trace_ids": trace_ids,
        "samples": samples,
        "proxy": {"cpu_percent": round((cpu_after - cpu_before) / wall * 100, 1) if proxy else None,
                  "rss_mb": round(rss, 1) if proxy else None},  # fmt: skip
    }


def _results(direct: dict[str, Any], run: dict[str, Any], breakdown: dict[str, Any]) -> dict[str, Any]:
    ns, st = run["phases"]["nonstream"]["summary"], run["phases"]["stream"]["summary"]
    dns, dst = direct["nonstream"], direct["stream"]
    lat, dlat = ns["latency_ms"] or {}, dns["latency_ms"] or {}
    ttft, dttft = st["ttft_ms"] or {}, dst["ttft_ms"] or {}
    e2e = st["e2e_ms"] or {}
    litellm_header = run["phases"]["nonstream"]["headers"].get("x-litellm-overhead-duration-ms") or {}
    return {
        "nonstream": {
            "rps": ns["rps"],
            "latency_ms": {k: lat.get(k) for k in ("p50", "p95", "p99")},
            "client_overhead_ms": {k: round(lat[k] - dlat[k], 3) for k in ("p50", "p95") if k in lat and k in dlat},
            "litellm_overhead_header_ms": {k: litellm_header.get(k) for k in ("p50", "p95")} if litellm_header else None,
            "errors": ns["errors"],
        },
        "stream": {
            "ttft_ms": {k: ttft.get(k) for k in ("p50", "p95")},
            "ttft_added_ms": {k: round(ttft[k] - dttft[k], 3) for k in ("p50", "p95") if k in ttft and k in dttft},
            "full_stream_ms": {k: e2e.get(k) for k in ("p50", "p95")},
            "streams_per_s": st["rps"],
            "errors": st["errors"],
        },
        "direct": {"latency_ms": {k: dlat.get(k) for k in ("p50", "p95")}, "ttft_ms": {k: dttft.get(k) for k in ("p50", "p95")},
                   "rps": dns["rps"]},  # fmt: skip
        "server_overhead_ms": breakdown["server_overhead_ms"],
        "stages": breakdown["stages"],
        "remainder": breakdown["remainder"],
        "gc_pause_ms": breakdown["gc_pause_ms"],
        "fast_paths": breakdown["fast_paths"],
        "joined_requests": breakdown["joined_requests"],
        "workers_seen": breakdown.get("workers_seen"),
        "proxy": run["proxy"],
        "driver": {"name": run["phases"]["nonstream"]["config"].get("driver", "perfkit"), **ns["driver"]},
        **({"locust": {name: phase["locust"] for name, phase in run["phases"].items()}} if "locust" in run["phases"]["nonstream"] else {}),
    }


def _start_flamegraph(options: BenchOptions, proxy: Child | None, target: str, workers: int) -> tuple[Any, str] | None:
    """py-spy on the proxy and its workers, non-blocking (it does not pause them to sample)."""
    if options.flamegraph == "off" or proxy is None:
        return None
    slug = "".join(c if c.isalnum() or c in ".-" else "-" for c in target)
    suffix = "speedscope.json" if options.flamegraph == "speedscope" else "svg"
    output = str(Path(f"{options.flamegraph_prefix}.{slug}.w{workers}.{suffix}").resolve())
    flamegraph = FlamegraphOptions(output=output, format=options.flamegraph, rate=50, subprocesses=True, nonblocking=True)
    try:
        return start_recording(flamegraph, proxy.process.pid), output
    except ProfileError as exc:
        raise BenchError(f"--flamegraph: {exc}") from None


def _stop_flamegraph(options: BenchOptions, process: Any, output: str) -> str:
    try:
        path = stop_recording(process, output)
    except ProfileError as exc:
        raise BenchError(f"--flamegraph: {exc}") from None
    _say(options, f"flamegraph of the proxy: {path}")
    return str(path)


def run_bench(options: BenchOptions) -> dict[str, Any]:
    started = time.time()
    runs = []
    with tempfile.TemporaryDirectory(prefix="perfkit-bench-") as tmp, Children() as children:
        workdir = Path(tmp)
        upstream = start_mock(children, "--ttft-ms", str(options.ttft_ms), "--itl-ms", str(options.itl_ms), "--chunks", str(options.chunks))
        direct = {}
        for name, stream, concurrency in (("nonstream", False, options.concurrency), ("stream", True, options.stream_concurrency)):
            _say(options, f"direct to the mock, {name} ({options.direct_duration_s:g} s)")
            direct[name] = _phase(upstream, stream, concurrency, options.direct_duration_s, 1.0, options)["summary"]
        receiver = SpanReceiver()
        try:
            for target, version in _targets(options):
                for workers in options.workers:
                    proxy: Child | None = None
                    if options.proxy_url:
                        url = options.proxy_url.rstrip("/")
                    else:
                        _say(options, f"starting {target} with {workers} worker(s)")
                        url, proxy = _start_proxy(children, options, version, workers, upstream, receiver, workdir)
                    repeats = []
                    flamegraph = None
                    for repeat in range(options.repeats):
                        receiver.take()
                        recording = _start_flamegraph(options, proxy, target, workers) if repeat == 0 else None
                        try:
                            run = _one_run(url, options, receiver, workdir, proxy)
                        except BaseException:  # Ctrl-C or a failed phase: py-spy runs in its own session
                            if recording is not None:
                                recording[0].kill()
                            raise
                        if recording is not None:
                            flamegraph = _stop_flamegraph(options, *recording)
                        run["breakdown"] = stage_breakdown(receiver.take(), run.pop("trace_ids"))
                        repeats.append(run)
                    if proxy is not None:
                        children.stop(proxy)
                    runs.append({**_summarize(target, version, workers, direct, repeats), "flamegraph": flamegraph})
        finally:
            receiver.close()
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "label": options.label,
        "tool": {"name": "perfkit bench", "version": __version__},
        "created_unix": int(started),
        "duration_s": round(time.time() - started, 1),
        "config": {k: v for k, v in options.__dict__.items() if k not in ("log", "progress")},
        **runs[0],
    }
    if len(runs) > 1:
        document["runs"] = runs
    return document


def _samples_by_run(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-request values of every repeat, kept apart (perfkit compare resamples
    runs, then requests, so run-to-run variation widens its intervals)."""
    samples: dict[str, Any] = {key: [run["samples"][key] for run in repeats] for key in repeats[0]["samples"]}
    server = [run["breakdown"].get("samples", {}) for run in repeats]
    samples["server_overhead_ms"] = [s.get("server_overhead_ms", []) for s in server]
    stages = sorted({name for s in server for name in s.get("stage_self_ms", {})})
    samples["stage_self_ms"] = {name: [s.get("stage_self_ms", {}).get(name, [0.0]) for s in server] for name in stages}
    return samples


def _summarize(target: str, version: str | None, workers: int, direct: dict[str, Any], repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """The median repeat (by non-streaming RPS), with the spread of every repeat."""
    ordered = sorted(repeats, key=lambda r: r["phases"]["nonstream"]["summary"]["rps"])
    median = ordered[(len(ordered) - 1) // 2]
    results = _results(direct, median, median["breakdown"])
    rps = [r["phases"]["nonstream"]["summary"]["rps"] for r in repeats]
    fast = [r["phases"]["stream"]["summary"]["rps"] for r in repeats]
    results["samples"] = _samples_by_run(repeats)
    results["samples"]["rps_repeats"] = rps
    results["samples"]["streams_per_s_repeats"] = fast
    return {
        "target": target,
        "litellm_version": results["fast_paths"].get("version", version),
        "workers": workers,
        "repeats": len(repeats),
        "spread": {"rps": {"min": min(rps), "median": statistics.median(rps), "max": max(rps)},
                   "streams_per_s": {"min": min(fast), "median": statistics.median(fast), "max": max(fast)}},  # fmt: skip
        **results,
    }

