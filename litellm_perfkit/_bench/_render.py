"""The bench result as text: the PR-style table, then where the overhead went."""

from __future__ import annotations

from collections.abc import Mapping

from .._wire._names import EVENT_LOOP_STAGE, OUTSIDE_WALL_STAGES, PROTOCOL_STAGE
from ..types import P50P95P99, BenchResult, BenchRun, Unmeasured
from ._analysis import OUTSIDE_STAGES
from ._perturbation import format_ratio
from ._render_deploy import deployment_lines

__all__ = ["OUTSIDE_WALL_LABELS", "render_bench", "unmeasured_warning"]

# What the share column says of a stage outside the request's wall time.
OUTSIDE_WALL_LABELS = {
    name: "before the app"
    if name == PROTOCOL_STAGE
    else "between steps"
    if name == EVENT_LOOP_STAGE
    else "after the response"
    for name in OUTSIDE_WALL_STAGES
}


def _pair(data: Mapping[str, object] | None, unit: str = "ms") -> str:
    p50, p95 = (data.get("p50"), data.get("p95")) if data else (None, None)
    if not isinstance(p50, (int, float)) or not isinstance(p95, (int, float)):
        return "n/a"
    return f"p50 {p50:.2f}  p95 {p95:.2f} {unit}"


def _latency(lat: P50P95P99) -> str:
    """p50, p95 and p99, or n/a when no request succeeded (every one refused, or none ended in the window)."""
    p50, p95, p99 = lat["p50"], lat["p95"], lat["p99"]
    if p50 is None or p95 is None or p99 is None:
        return "n/a (no successful request)"
    return f"p50 {p50:.2f}  p95 {p95:.2f}  p99 {p99:.2f} ms"


def unmeasured_warning(unmeasured: Unmeasured, joined: int) -> str | None:
    """One line when some requests took a path perfkit could not measure."""
    parts = []
    if unmeasured["upstream"]:
        parts.append(
            f"{unmeasured['upstream']} of {joined} requests waited on an upstream perfkit does not see (an HTTP client it does "
            "not wrap, or a cache hit): their overhead would include the provider's time, so it is left out of the figures"
        )
    if unmeasured["auth"]:
        parts.append(f"{unmeasured['auth']} of {joined} requests had no auth stage (their route's auth is not wrapped)")
    return "warning: " + "; ".join(parts) + " (docs/litellm.md)" if parts else None


def _instances(run: BenchRun) -> str:
    count = len(run.get("instances") or ())
    return f"{count} instances, " if count > 1 else ""


def _headline(run: BenchRun) -> str:
    if run.get("headline") == "plain":
        return (
            "RPS, latency and proxy CPU from a plain proxy; stages from one under perfkit run, every request recorded"
        )
    return "every figure from the proxy under perfkit run, every request recorded (its cost included)"


def _run(run: BenchRun) -> list[str]:
    lines = [
        f"== {run['target']} ({_instances(run)}{run['workers']} worker(s), LiteLLM {run.get('litellm_version') or '?'}, {run['repeats']} repeat(s))",
        _headline(run),
        "",
        *_metric_table(run),
        *_cost_table(run),
        *_stage_table(run),
    ]
    unmeasured = run.get("unmeasured")
    warning = unmeasured and unmeasured_warning(unmeasured, run["joined_requests"] + unmeasured["upstream"])
    if warning:
        lines += ["", warning]
    fast = run.get("fast_paths") or {}
    deployment = run.get("deployment")
    if fast:
        # With a deployment, the callbacks it registers (LiteLLM's spend logger among them) are named.
        hidden = ("version", "table") if deployment else ("version", "table", "callbacks")
        lines += ["", "fast paths: " + ", ".join(f"{k}={v}" for k, v in fast.items() if k not in hidden)]
    return lines + deployment_lines(run)


def _metric_table(run: BenchRun) -> list[str]:
    """The client's figures, the load driver's and the proxy's."""
    ns, st = run["nonstream"], run["stream"]
    lat = ns["latency_ms"]
    lines = [
        "| metric | value |",
        "|---|---|",
        f"| non-streaming RPS | {ns['rps']:.1f} (spread {run['spread']['rps']['min']:.1f}-{run['spread']['rps']['max']:.1f}) |",
        f"| latency | {_latency(lat)} |",
        f"| client-observed overhead (proxy - direct) | {_pair(ns['client_overhead_ms'])} |",
        f"| x-litellm-overhead-duration-ms | {_pair(ns['litellm_overhead_header_ms'])} |",
        f"| server-side overhead (perfkit) | {_pair(run['server_overhead_ms'])} |",
        f"| streaming TTFT | {_pair(st['ttft_ms'])} |",
        f"| TTFT added vs direct | {_pair(st['ttft_added_ms'])} |",
        f"| full stream | {_pair(st['full_stream_ms'])} |",
        f"| streams/s | {st['streams_per_s']:.1f} |",
    ]
    driver = run.get("driver")
    if driver:
        lines.append(
            f"| load driver | {driver['name']}, {driver['processes']} process(es), CPU {driver['cpu_fraction']:.0%} of a core each |"
        )
    proxy = run.get("proxy") or {}
    if proxy.get("cpu_percent") is not None:
        lines.append(
            f"| proxy CPU / RSS | {proxy['cpu_percent']:.0f}% of a core / {proxy['rss_mb']:.0f} MiB (all processes) |"
        )
    per_request = proxy.get("cpu_ms_per_request") or {}
    if per_request:
        capacity = ", ".join(
            f"{name} {ms:.2f} ms (at most {1000 / ms:.0f}/s per core)" for name, ms in per_request.items() if ms > 0
        )
        lines.append(f"| proxy CPU per request | {capacity} |")
    agent = proxy.get("agent_cpu_ms_per_request") or {}
    if any(ms > 0 for ms in agent.values()):
        lines.append(
            f"| perfkit's export agent CPU per request (beside the proxy's) | {', '.join(f'{name} {ms:.3f} ms' for name, ms in agent.items())} |"
        )
    idle = run.get("idle")
    if idle:
        server = idle["server_overhead_ms"]
        lines.append(
            f"| overhead on an idle proxy (1 user) | client-observed {_pair(idle['client_overhead_ms'])}"
            + (f"; server-side p50 {server['p50']:.2f} ms" if server else "")
            + " |"
        )
    if ns["errors"] or st["errors"]:
        lines.append(f"| errors | {ns['errors']} non-streaming, {st['errors']} streaming |")
    return lines


def _cost_table(run: BenchRun) -> list[str]:
    """perfkit's own cost in this run: the recorded proxy against the plain one, in the same rounds."""
    cost = run.get("perfkit_cost")
    if not cost:
        return []
    phases = [
        (label, phase)
        for label, phase in (("non-streaming", cost["nonstream"]), ("streaming", cost["stream"]))
        if phase
    ]
    rounds = ", ".join(f"{label} {phase['rounds']} x {phase['burst_requests']} requests" for label, phase in phases)
    lines = [
        "",
        f"perfkit's own cost (--record-rate {cost['record_rate']} against plain, the two taking turns: {rounds}):",
        "",
        "| metric | plain | recorded | recorded / plain, 95% interval |",
        "|---|---:|---:|---|",
    ]
    for label, phase in phases:
        plain, recorded = phase["plain"], phase["recorded"]
        lines.append(
            f"| {label} RPS | {plain['rps']:.1f} | {recorded['rps']:.1f} | {format_ratio(phase['rps_ratio'])} |"
        )
        cpu = (plain["cpu_ms_per_request"], recorded["cpu_ms_per_request"])
        if cpu[0] is not None and cpu[1] is not None:
            agent = recorded["agent_cpu_ms_per_request"]
            of_which = f" (agent {agent:.3f})" if agent else ""
            lines.append(
                f"| {label} CPU ms per request | {cpu[0]:.3f} | {cpu[1]:.3f}{of_which} | {format_ratio(phase['cpu_ratio'])} |"
            )
    if any(phase["rounds"] < 4 for _, phase in phases):
        lines.append("fewer than 4 rounds: the intervals cannot see the rounds' noise well; use a longer --duration")
    return lines


def _stage_table(run: BenchRun) -> list[str]:
    """Where the server-side overhead went, stage by stage, and the CPU table."""
    lines: list[str] = []
    stages, remainder, overhead = run["stages"], run["remainder"], run["server_overhead_ms"]
    if stages and remainder and overhead:
        lines += [
            "",
            f"where the server-side overhead went ({run['joined_requests']} requests joined by trace id):",
            "",
            "| stage | p50 ms | p95 ms | mean self ms | share of overhead |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, stage in stages.items():
            share = (
                "upstream"
                if stage["upstream"]
                else OUTSIDE_WALL_LABELS.get(name, "-")
                if stage["share"] is None
                else f"{stage['share']:.1%}"
            )
            lines.append(
                f"| {name} | {stage['p50_ms']:.3f} | {stage['p95_ms']:.3f} | {stage['mean_self_ms']:.3f} | {share} |"
            )
        lines.append(f"| (unattributed) | | | {remainder['mean_ms']:.3f} | {remainder['share']:.1%} |")
        total = sum(s["share"] for s in stages.values() if s["share"] is not None) + (remainder["share"] or 0)
        lines.append(f"| total | | | {overhead['mean']:.3f} | {total:.1%} |")
        lines += _cpu_table(run)
        paused = run.get("gc_pause_ms")
        if paused and paused["share"] is not None:
            lines += [
                "",
                f"collector pauses inside requests (they overlap the rows above): mean {paused['mean']:.3f} ms, "
                f"p95 {paused['p95']:.3f} ms, max {paused['max']:.3f} ms; {paused['share']:.1%} of the mean overhead",
            ]
    else:
        lines += ["", "no per-stage data: the gateway exported no spans to perfkit"]
    return lines


def _cpu_table(run: BenchRun) -> list[str]:
    """The same overhead split into CPU per stage, event-loop queueing and other waits
    (step accounting); nothing when the spans carry no split."""
    stages, remainder, overhead = run["stages"], run["remainder"], run["server_overhead_ms"]
    own = [(name, s) for name, s in stages.items() if not s["upstream"] and s.get("cpu_ms") is not None]
    if not own or not remainder or remainder.get("cpu_ms") is None or not overhead or not overhead["mean"]:
        return []
    mean = overhead["mean"]
    rows = sorted(((name, float(s["cpu_ms"] or 0.0)) for name, s in own), key=lambda row: -row[1])
    rows.append((OUTSIDE_STAGES, float(remainder["cpu_ms"] or 0.0)))
    # Waiting before the app or after the response is no part of the overhead; that work's CPU is in the rows, as the proxy's.
    during = [s for name, s in own if name not in OUTSIDE_WALL_STAGES]
    queue = sum(float(s["queue_ms"] or 0.0) for s in during) + float(remainder["queue_ms"] or 0.0)
    waits = sum(float(s["io_ms"] or 0.0) for s in during) + float(remainder["io_ms"] or 0.0)
    cpu = sum(ms for _, ms in rows)
    lines = [
        "",
        "the same overhead by CPU (the stage's own code running), event-loop queueing and other waits, means per request:",
        "",
        "| stage | own CPU ms | share of overhead |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {ms:.3f} | {ms / mean:.1%} |" for name, ms in rows]
    lines += [
        f"| CPU, all stages | {cpu:.3f} | {cpu / mean:.1%} |",
        f"| event-loop queueing (ready, the loop busy with others) | {queue:.3f} | {queue / mean:.1%} |",
        f"| I/O and other waits (not upstream) | {waits:.3f} | {waits / mean:.1%} |",
    ]
    proxy = run.get("proxy") or {}
    process = _recorded_cpu(run)
    steps, named = proxy.get("steps_cpu_ms_per_request") or {}, proxy.get("named_cpu_ms_per_request") or {}
    phases = [phase for phase in process if phase in steps and process[phase] > 0]
    if phases:
        lines += [
            "",
            "the requests' own CPU against the proxy's process CPU, per request: "
            + "; ".join(
                f"{phase} {steps[phase]:.2f} of {process[phase]:.2f} ms ({steps[phase] / process[phase]:.0%})"
                for phase in phases
            )
            + (
                ". The rest ran outside the requests' steps, threads and the event loop's work between them: "
                "the proxy's other threads (perfkit's hand-off among them), the loop's work after an idle second, "
                "the collector in other threads."
                if EVENT_LOOP_STAGE in stages
                else ". The rest ran outside the requests' steps and threads: the event loop between steps, "
                "the server's work outside its parsing callbacks, the collector outside any step."
            ),
        ]
    phases = [phase for phase in phases if phase in named]
    if phases:
        lines += [
            "named stages' CPU against the proxy's process CPU, per request: "
            + "; ".join(
                f"{phase} {named[phase]:.2f} of {process[phase]:.2f} ms ({named[phase] / process[phase]:.0%})"
                for phase in phases
            )
        ]
    return lines


def _recorded_cpu(run: BenchRun) -> dict[str, float]:
    """The recorded proxy's process CPU per request by phase (its export agents left out): what its spans' CPU is part of."""
    cost = run.get("perfkit_cost")
    if not cost:
        return dict((run.get("proxy") or {}).get("cpu_ms_per_request") or {})
    cpu = {}
    for name, phase in (("nonstream", cost["nonstream"]), ("stream", cost["stream"])):
        recorded = phase["recorded"] if phase else None
        if recorded and recorded["cpu_ms_per_request"] is not None:
            cpu[name] = recorded["cpu_ms_per_request"] - (recorded["agent_cpu_ms_per_request"] or 0.0)
    return cpu


def _scaling(runs: list[BenchRun]) -> list[str]:
    """RPS and latency per proxy worker count, for each target swept over workers."""
    lines: list[str] = []
    for target in dict.fromkeys((r["target"], r.get("litellm_version")) for r in runs):
        series = sorted(
            (r for r in runs if (r["target"], r.get("litellm_version")) == target), key=lambda r: r["workers"]
        )
        if len({r["workers"] for r in series}) < 2:
            continue
        base = series[0]["nonstream"]["rps"] or 1.0
        lines += [
            f"scaling: {target[0]} (LiteLLM {target[1] or '?'})",
            "",
            "| workers | RPS | x first | latency p50 / p95 ms | streams/s | TTFT p50 ms | proxy CPU |",
            "|---:|---:|---:|---|---:|---:|---:|",
        ]
        for r in series:
            ns, st, cpu = r["nonstream"], r["stream"], (r.get("proxy") or {}).get("cpu_percent")
            lines.append(
                f"| {r['workers']} | {ns['rps']:.1f} | {ns['rps'] / base:.2f} | {ns['latency_ms']['p50']:.2f} / {ns['latency_ms']['p95']:.2f} "
                f"| {st['streams_per_s']:.1f} | {st['ttft_ms']['p50']:.2f} | {'n/a' if cpu is None else f'{cpu:.0f}%'} |"
            )
        lines.append("")
    return lines


def render_bench(document: BenchResult) -> str:
    runs = document.get("runs") or [document]
    lines = [f"perfkit bench '{document['label']}' ({document['duration_s']:.0f} s)", ""]
    lines += _scaling(runs)
    for run in runs:
        lines += _run(run) + [""]
    return "\n".join(lines).rstrip()
