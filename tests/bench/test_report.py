"""The HTML report draws its charts in a real headless Chromium."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._bench._report import COLORS, render_html
from litellm_perfkit._wire._names import EVENT_LOOP_STAGE, PROTOCOL_STAGE
from tests.bench.test_compare import fake_result
from tests.support.browser import read_png, screenshot


def bench_document(seed: int, label: str, slowdown: float = 1.0) -> dict:  # type: ignore[type-arg]
    document = fake_result(seed, slowdown=slowdown, label=label)
    stage = {"p50_ms": 2.0, "p95_ms": 3.0, "mean_self_ms": 2.0, "share": 0.5, "requests": 300, "upstream": False}
    document.update(
        target="litellm",
        workers=1,
        nonstream={"rps": 50.0 / slowdown, "latency_ms": {"p50": 120.0 * slowdown}},
        stream={"ttft_ms": {"p50": 80.0 * slowdown}},
        server_overhead_ms={"mean": 4.0 * slowdown},
        stages={
            "auth": stage,
            "route": {**stage, "mean_self_ms": 1.0, "share": 0.25},
            "upstream": {**stage, "share": None, "upstream": True},
        },
        remainder={"mean_ms": 1.0, "share": 0.25},
    )
    return document


def test_a_stage_outside_the_requests_wall_time_has_no_share_and_says_where_it_ran() -> None:
    """``protocol`` and ``event_loop`` carry no share of the overhead (null): the table says where they ran."""
    document = bench_document(1, "main")
    outside = {"p50_ms": 0.1, "p95_ms": 0.2, "mean_self_ms": 0.1, "share": None, "requests": 300, "upstream": False}
    document["stages"].update({PROTOCOL_STAGE: outside, EVENT_LOOP_STAGE: {**outside, "cpu_ms": 0.4}})
    page = render_html([("main", document)])
    for name, where in ((PROTOCOL_STAGE, "before the app"), (EVENT_LOOP_STAGE, "between steps")):
        assert f"<tr><td>{name}</td>" in page and f"<td>{where}</td>" in page, name


def colored_pixels(rows: list[bytes], color: str) -> int:
    target = bytes.fromhex(color.lstrip("#"))
    return sum(row[i : i + 3] == target for row in rows for i in range(0, len(row), 3))


@pytest.mark.integration
def test_report_renders_charts_in_headless_chromium(tmp_path: Path) -> None:
    files = []
    for seed, label, slowdown in ((1, "main", 1.0), (2, "branch", 1.2)):
        path = tmp_path / f"{label}.json"
        path.write_bytes(orjson.dumps(bench_document(seed, label, slowdown)))
        files.append(str(path))
    page = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "report", *files, "--out", str(page)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    assert (
        "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<script" not in html
    )  # self-contained
    for chart in ("latency-cdf", "ttft-histogram", "ab-bars", "waterfall-0", "waterfall-1"):
        assert f'id="{chart}"' in html

    shot = tmp_path / "report.png"
    screenshot(page, shot)
    width, height, rows = read_png(shot)
    assert (width, height) == (1000, 2400)
    # Both runs' series are drawn, in their colours, in every chart band.
    band = height // 4
    for top in (0, band):
        part = rows[top : top + band]
        assert colored_pixels(part, COLORS[0]) > 200 and colored_pixels(part, COLORS[1]) > 200, top
