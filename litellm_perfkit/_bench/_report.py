"""``perfkit report``: one self-contained HTML file of bench results (and bisect journals).

Charts are inline SVG drawn here (no script, no font, no network): latency
CDFs, a TTFT histogram, a stage waterfall with its breakdown table, and A/B
bars when several runs are given.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..types import BenchResult, BenchRun, BenchStage
from ._render import OUTSIDE_WALL_LABELS

__all__ = ["render_html"]

COLORS = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2")
W, H, PAD = 640, 260, 48


def _pool(runs: list[Any] | None) -> list[float]:
    """Samples kept per repeat (lists), or flat (older results): all of them, sorted."""
    flat: list[float] = []
    for item in runs or []:
        flat.extend(item if isinstance(item, list) else [item])
    return sorted(v for v in flat if isinstance(v, (int, float)))


def _axis(x_max: float, y_label: str, x_label: str) -> str:
    ticks = "".join(
        f'<text x="{PAD + (W - 2 * PAD) * i / 4:.1f}" y="{H - PAD + 16}" font-size="11" text-anchor="middle">{x_max * i / 4:.0f}</text>'
        for i in range(5)
    )
    return (
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#333"/>'
        f'<line x1="{PAD}" y1="{PAD / 2}" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>{ticks}'
        f'<text x="{W / 2}" y="{H - 8}" font-size="12" text-anchor="middle">{x_label}</text>'
        f'<text x="12" y="{H / 2}" font-size="12" transform="rotate(-90 12 {H / 2})" text-anchor="middle">{y_label}</text>'
    )


def _svg(chart_id: str, body: str) -> str:
    return f'<svg class="chart" id="{chart_id}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg">{body}</svg>'


def _legend(labels: list[str]) -> str:
    return "".join(
        f'<rect x="{W - PAD - 150}" y="{12 + 16 * i}" width="10" height="10" fill="{COLORS[i % len(COLORS)]}"/>'
        f'<text x="{W - PAD - 135}" y="{21 + 16 * i}" font-size="11">{html.escape(label)}</text>'
        for i, label in enumerate(labels)
    )


def _cdf(chart_id: str, series: list[tuple[str, list[float]]], x_label: str) -> str:
    series = [(label, values) for label, values in series if values]
    if not series:
        return "<p>no samples</p>"
    x_max = max(values[int(len(values) * 0.995) - 1] for _, values in series) or 1.0
    lines = []
    for i, (_, values) in enumerate(series):
        step = max(1, len(values) // 300)
        points = " ".join(
            f"{PAD + (W - 2 * PAD) * min(v, x_max) / x_max:.1f},{H - PAD - (H - 1.5 * PAD) * (n + 1) / len(values):.1f}"
            for n, v in list(enumerate(values))[::step]
        )
        lines.append(
            f'<polyline class="series" fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="2" points="{points}"/>'
        )
    return _svg(
        chart_id, _axis(x_max, "fraction of requests", x_label) + "".join(lines) + _legend([s[0] for s in series])
    )


def _histogram(chart_id: str, series: list[tuple[str, list[float]]], x_label: str, bins: int = 40) -> str:
    series = [(label, values) for label, values in series if values]
    if not series:
        return "<p>no samples</p>"
    x_max = max(values[int(len(values) * 0.995) - 1] for _, values in series) or 1.0
    width = (W - 2 * PAD) / bins
    bars = []
    for i, (_, values) in enumerate(series):
        counts = [0] * bins
        for v in values:
            counts[min(bins - 1, int(v / x_max * bins))] += 1
        top = max(counts) or 1
        for b, count in enumerate(counts):
            height = (H - 1.5 * PAD) * count / top
            bars.append(
                f'<rect class="bar" x="{PAD + b * width:.1f}" y="{H - PAD - height:.1f}" width="{width - 1:.1f}" '
                f'height="{height:.1f}" fill="{COLORS[i % len(COLORS)]}" fill-opacity="{0.8 if len(series) == 1 else 0.5}"/>'
            )
    return _svg(chart_id, _axis(x_max, "requests (scaled)", x_label) + "".join(bars) + _legend([s[0] for s in series]))


_QUEUE_COLOR, _IO_COLOR = "#d62728", "#bbbbbb"


def _waterfall(chart_id: str, run: BenchRun) -> str:
    """Each stage's own time in turn; with step accounting, each bar is its
    CPU (the stage's color), event-loop queueing (red) and other waits (grey)."""
    stages = [(n, s) for n, s in (run.get("stages") or {}).items() if not s["upstream"]]
    remainder = run.get("remainder")
    rows: list[tuple[str, float, tuple[float, float, float] | None]] = []
    for name, part in [*stages, ("(unattributed)", remainder)]:
        if part is None:
            rows.append((name, 0.0, None))
            continue
        wall = float(part["mean_self_ms"] if "mean_self_ms" in part else part["mean_ms"])  # type: ignore[typeddict-item]
        cpu = part.get("cpu_ms")
        split = (
            None if cpu is None else (float(cpu), float(part.get("queue_ms") or 0.0), float(part.get("io_ms") or 0.0))
        )
        rows.append((name, wall, split))
    total = sum(wall for _, wall, _ in rows) or 1.0
    height = 24 * len(rows) + PAD + (16 if any(split for _, _, split in rows) else 0)
    bars, start = [], 0.0
    for i, (name, value, split) in enumerate(rows):
        x = 170 + (W - 190) * start / total
        width = max(1.0, (W - 190) * value / total)
        bars.append(f'<text x="164" y="{22 + 24 * i}" font-size="11" text-anchor="end">{html.escape(name)}</text>')
        if split is None or not sum(split):
            bars.append(
                f'<rect class="bar" x="{x:.1f}" y="{10 + 24 * i}" width="{width:.1f}" height="16" fill="{COLORS[i % len(COLORS)]}"/>'
            )
            label = f"{value:.2f} ms"
        else:
            offset = x
            for ms, color in zip(split, (COLORS[i % len(COLORS)], _QUEUE_COLOR, _IO_COLOR)):
                piece = (W - 190) * ms / total
                bars.append(
                    f'<rect class="bar" x="{offset:.1f}" y="{10 + 24 * i}" width="{piece:.1f}" height="16" fill="{color}"/>'
                )
                offset += piece
            label = f"{value:.2f} ms (CPU {split[0]:.2f}, queued {split[1]:.2f}, waiting {split[2]:.2f})"
        bars.append(f'<text x="{x + width + 4:.1f}" y="{22 + 24 * i}" font-size="10">{label}</text>')
        start += value
    if height > 24 * len(rows) + PAD:
        y = 24 * len(rows) + 20
        bars.append(
            f'<rect x="170" y="{y - 9}" width="10" height="10" fill="{_QUEUE_COLOR}"/><text x="184" y="{y}" font-size="10">event-loop queueing</text>'
            f'<rect x="310" y="{y - 9}" width="10" height="10" fill="{_IO_COLOR}"/><text x="324" y="{y}" font-size="10">I/O and other waits</text>'
            f'<text x="460" y="{y}" font-size="10">the rest of each bar: CPU</text>'
        )
    return f'<svg class="chart" id="{chart_id}" width="{W + 300}" height="{height}" xmlns="http://www.w3.org/2000/svg">{"".join(bars)}</svg>'


def _ab_bars(chart_id: str, runs: list[tuple[str, BenchRun]]) -> str:
    metrics: list[tuple[str, Callable[[BenchRun], float | None]]] = [
        ("RPS", lambda r: r["nonstream"]["rps"]),
        ("latency p50 ms", lambda r: r["nonstream"]["latency_ms"]["p50"]),
        ("TTFT p50 ms", lambda r: r["stream"]["ttft_ms"]["p50"]),
        ("overhead mean ms", lambda r: (r.get("server_overhead_ms") or {"mean": 0.0})["mean"]),
    ]
    group = (W - 2 * PAD) / len(metrics)
    bars = []
    for m, (name, get) in enumerate(metrics):
        values = [float(get(run) or 0.0) for _, run in runs]
        top = max(values) or 1.0
        width = group * 0.8 / len(runs)
        for i, value in enumerate(values):
            height = (H - 1.5 * PAD) * value / top
            x = PAD + m * group + i * width
            bars.append(
                f'<rect class="bar" x="{x:.1f}" y="{H - PAD - height:.1f}" width="{width - 2:.1f}" height="{height:.1f}" fill="{COLORS[i % len(COLORS)]}"/>'
                f'<text x="{x + width / 2:.1f}" y="{H - PAD - height - 4:.1f}" font-size="9" text-anchor="middle">{value:.1f}</text>'
            )
        bars.append(
            f'<text x="{PAD + (m + 0.4) * group:.1f}" y="{H - PAD + 16}" font-size="11" text-anchor="middle">{name}</text>'
        )
    return _svg(
        chart_id,
        "".join(bars)
        + f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#333"/>'
        + _legend([n for n, _ in runs]),
    )


def _share(name: str, stage: BenchStage) -> str:
    """The share column: a stage outside the request's wall time has no share of its overhead, and says where it ran."""
    if stage["upstream"]:
        return "upstream"
    share = stage["share"]
    return OUTSIDE_WALL_LABELS.get(name, "-") if share is None else f"{share:.1%}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _table(run: BenchRun) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{s['p50_ms']:.3f}</td><td>{s['p95_ms']:.3f}</td><td>{s['mean_self_ms']:.3f}</td>"
        f"<td>{_share(name, s)}</td><td>{_ms(s.get('cpu_ms'))}</td><td>{_ms(s.get('queue_ms'))}</td><td>{_ms(s.get('io_ms'))}</td></tr>"
        for name, s in (run.get("stages") or {}).items()
    )
    return (
        "<table><tr><th>stage</th><th>p50 ms</th><th>p95 ms</th><th>mean self ms</th><th>share</th>"
        f"<th>own CPU ms</th><th>queued ms</th><th>waiting ms</th></tr>{rows}</table>"
    )


def _flamegraph_link(run: BenchRun, base: Path | None) -> str:
    path = run.get("flamegraph")
    if not path:
        return ""
    href = os.path.relpath(path, base) if base is not None else path
    hint = "open it at speedscope.app or with npx speedscope" if str(path).endswith(".json") else "an SVG flamegraph"
    return f'<p>Flamegraph of the proxy during this run: <a href="{html.escape(href)}">{html.escape(Path(path).name)}</a> ({hint})</p>'


def _bisect_chart(chart_id: str, curve: list[dict[str, Any]]) -> str:
    """The per-release curve: the metric relative to the first release, a point per
    release the curve reaches, each step's interval as a whisker on its end."""
    points, level = [(curve[0]["lower"], 1.0, 1.0, 1.0)] if curve else [], 1.0
    for step in curve:
        low, high = step["interval"]
        points.append((step["upper"], level * step["ratio"], level * low, level * high))
        level *= step["ratio"]
    top = max((high for _, _, _, high in points), default=1.0) or 1.0
    slot = (W - 2 * PAD) / max(1, len(points))
    marks = []
    for i, (version, value, low, high) in enumerate(points):
        x, height = PAD + i * slot, (H - 1.5 * PAD) * value / top
        y_low, y_high = H - PAD - (H - 1.5 * PAD) * low / top, H - PAD - (H - 1.5 * PAD) * high / top
        marks.append(
            f'<rect class="bar" x="{x + slot * 0.1:.1f}" y="{H - PAD - height:.1f}" width="{slot * 0.8:.1f}" height="{height:.1f}" fill="{COLORS[0]}"/>'
            f'<line x1="{x + slot / 2:.1f}" y1="{y_low:.1f}" x2="{x + slot / 2:.1f}" y2="{y_high:.1f}" stroke="#111"/>'
            f'<text x="{x + slot / 2:.1f}" y="{H - PAD + 14}" font-size="9" text-anchor="middle">{html.escape(version)}</text>'
        )
    return _svg(
        chart_id, "".join(marks) + f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#333"/>'
    )


def render_bisect_section(label: str, journal: dict[str, Any], n: int) -> str:
    """A ``perfkit bisect`` journal: the per-release curve with intervals, and the changes found."""
    from ._bisect_bench import METRICS

    result, settings = journal.get("result") or {}, journal.get("settings", {})
    what, unit = METRICS.get(settings.get("metric", "cpu"), ("the metric", ""))
    rows = "".join(
        f"<tr><td>{html.escape(c['upper'])}</td><td>{html.escape(c['lower'])}</td><td>x{c['ratio']:.3f}</td>"
        f"<td>{c['interval'][0]:.3f} to {c['interval'][1]:.3f}</td><td>{c['difference']:+.3f}</td>"
        f"<td>{html.escape(', '.join(f'{name} {delta:+.3f} ms' for name, delta, _ in c['stages']))}</td>"
        f"<td>{html.escape(', '.join(f['function'] for f in c['functions']))}</td></tr>"
        for c in result.get("changes", [])
    )
    return (
        f"<h2>Bisect: {html.escape(label)}: {html.escape(str(settings.get('package')))}, {html.escape(what)} "
        f"({html.escape(unit)}), relative to the first release</h2>"
        + _bisect_chart(f"bisect-{n}", result.get("curve", []))
        + "<table><tr><th>release</th><th>after</th><th>ratio</th><th>95% interval</th><th>difference</th>"
        "<th>stages that moved</th><th>functions that moved</th></tr>"
        + (rows or '<tr><td colspan="7">no release moved the metric beyond its interval</td></tr>')
        + "</table>"
    )


def render_html(
    documents: list[tuple[str, BenchResult]],
    base: Path | None = None,
    bisections: Sequence[tuple[str, dict[str, Any]]] = (),
) -> str:
    """``documents``: (label, bench result) pairs; every run of each is drawn.
    ``bisections``: (label, ``perfkit bisect`` journal) pairs, drawn after them.
    ``base``: the HTML file's directory, for relative links to flamegraphs."""
    runs = [
        (f"{label}" if len(doc.get("runs") or [doc]) == 1 else f"{label} / {run['target']}", run)
        for label, doc in documents
        for run in (doc.get("runs") or [doc])
    ]
    sections = (
        []
        if not runs
        else [
            "<h2>Non-streaming latency (CDF)</h2>",
            _cdf(
                "latency-cdf",
                [(label, _pool(run.get("samples", {}).get("nonstream_latency_ms"))) for label, run in runs],
                "latency ms",
            ),
            "<h2>Streaming TTFT (histogram)</h2>",
            _histogram(
                "ttft-histogram",
                [(label, _pool(run.get("samples", {}).get("stream_ttft_ms"))) for label, run in runs],
                "TTFT ms",
            ),
        ]
    )
    if len(runs) > 1:
        sections += ["<h2>A/B</h2>", _ab_bars("ab-bars", runs)]
    for n, (label, run) in enumerate(runs):
        sections += [
            f"<h2>Where the overhead went: {html.escape(label)}</h2>",
            _waterfall(f"waterfall-{n}", run),
            _table(run),
            _flamegraph_link(run, base),
        ]
    sections += [render_bisect_section(label, journal, n) for n, (label, journal) in enumerate(bisections)]
    style = (
        "body{font-family:sans-serif;margin:24px;color:#111}h2{font-size:16px;margin-top:28px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}"
    )
    title = " vs ".join(html.escape(label) for label, _ in [*documents, *bisections])
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>perfkit report: {title}</title>'
        f"<style>{style}</style></head><body><h1>perfkit report: {title}</h1>{''.join(sections)}</body></html>"
    )
