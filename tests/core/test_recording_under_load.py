"""Above the record rate, driven by perfkit's own load driver: every request
with a sampled traceparent has its spans, every request with the secret has
Server-Timing, and the app never sees the secret's header (counted on the
app's side). The weights of what was recorded add up to the requests sent."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from litellm_perfkit import PerfkitMiddleware
from litellm_perfkit._core import _sink
from litellm_perfkit._export import Pipeline, read_settings
from litellm_perfkit._load import LoadPlan, Workload, run_load
from tests.support import apps
from tests.support.servers import uvicorn_server

pytestmark = [pytest.mark.integration, pytest.mark.quiet]

SECRET = "s3cret-under-load"
RECORD_RATE = 5.0
PLAIN_RATE, PLAIN_S = 100.0, 14.0  # 20x the cap, around the two phases below

# The plain traffic, from another process: no traceparent, so only the record rate records it.
PLAIN_DRIVER = """
import sys
from litellm_perfkit._load import LoadPlan, Workload, run_load
result = run_load(
    Workload(url=sys.argv[1], traceparent="off"),
    LoadPlan(concurrency=64, rate=float(sys.argv[2]), duration_s=float(sys.argv[3])),
    progress="off",
)
print(result["summary"]["requests"], result["summary"]["errors"])
"""


class Witness:
    """The app's side: what every request it got carried."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: Counter[str] = Counter()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            names = {name for name, _ in scope["headers"]}
            self.seen["requests"] += 1
            self.seen["secret header"] += b"x-perfkit-secret" in names
            self.seen["traceparent"] += b"traceparent" in names
        await self.app(scope, receive, send)


def server_spans(path: Path) -> list[dict[str, Any]]:
    """The SERVER spans of a file of OTLP/JSON spans, one a line (``perfkit run --out``)."""
    return [span for span in map(orjson.loads, path.read_bytes().splitlines()) if span["kind"] == 2]


def adjusted_count(span: dict[str, Any]) -> int:
    return next(int(a["value"]["intValue"]) for a in span["attributes"] if a["key"] == "perfkit.adjusted_count")


def test_above_the_rate_traced_and_secret_requests_are_recorded_and_the_secret_never_reaches_the_app(
    tmp_path: Path,
) -> None:
    spans = tmp_path / "spans.jsonl"
    settings = read_settings(
        {"OTEL_TRACES_EXPORTER": "jsonl", "PERFKIT_JSONL_PATH": str(spans), "OTEL_BSP_SCHEDULE_DELAY": "200"}
    )
    pipeline = Pipeline(settings, mode="process").start()
    _sink.set_sink(pipeline.sink)
    witness = Witness(apps.make_app())
    app = PerfkitMiddleware(witness, record_rate=RECORD_RATE, header_secret=SECRET, server_timing="trusted")
    try:
        with uvicorn_server(app) as url:
            plain = subprocess.Popen(
                [sys.executable, "-c", PLAIN_DRIVER, url, str(PLAIN_RATE), str(PLAIN_S)],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(2)  # the plain load has used the record rate's second at once
            phase = LoadPlan(concurrency=16, rate=20.0, duration_s=4.0)
            traced = run_load(
                Workload(url=url), phase, progress="off", jsonl_path=str(tmp_path / "traced.jsonl")
            )  # a sampled traceparent each
            secret = run_load(
                Workload(url=url, traceparent="off", headers=(("x-perfkit-secret", SECRET),)),
                phase,
                progress="off",
            )
            out, _ = plain.communicate(timeout=120)
            assert plain.returncode == 0
        pipeline.force_flush()
    finally:
        _sink.set_sink(None)
        pipeline.shutdown()
    plain_requests, plain_errors = map(int, out.split())
    assert plain_errors == 0 and traced["summary"]["errors"] == 0 and secret["summary"]["errors"] == 0

    # The app's side: every request reached it, none with the secret's header.
    sent = plain_requests + traced["summary"]["requests"] + secret["summary"]["requests"]
    assert witness.seen["requests"] == sent
    assert witness.seen["secret header"] == 0
    assert witness.seen["traceparent"] == traced["summary"]["requests"]

    # Every traced request has its server span (and one only); every secret one had Server-Timing.
    exported = Counter(span["traceId"] for span in server_spans(spans))
    trace_ids = [orjson.loads(line)["trace_id"] for line in (tmp_path / "traced.jsonl").read_bytes().splitlines()]
    assert len(trace_ids) == traced["summary"]["requests"] > 0
    assert [exported[trace_id] for trace_id in trace_ids] == [1] * len(trace_ids)
    assert secret["server_timing"]["auth"]["count"] == secret["summary"]["requests"] > 0

    # The plain load was far above the rate: a random sample of it was recorded,
    # and the adjusted counts of every span add up to the requests sent, but
    # for those passed by after the last one recorded: a geometric count of mean
    # PLAIN_RATE / RECORD_RATE (each drawn at that chance), past 7 means once in a thousand.
    recorded = sum(exported.values())
    assert recorded < plain_requests / 5
    assert sent - PLAIN_RATE / RECORD_RATE * 7 <= sum(map(adjusted_count, server_spans(spans))) <= sent
