"""The same answers, read by perfkit's driver and by the Locust user, give the same measurements and errors."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from litellm_perfkit._load._runner import LoadPlan, run_phase
from litellm_perfkit._load._workload import Workload
from tests.support.raw_server import chunked, raw_server, response

SSE = "text/event-stream"
ROLE = b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n'
TOKEN = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
DONE = b"data: [DONE]\n\n"
ANTHROPIC = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)

# case -> (the answer's bytes, the error class both drivers must give, output events)
CASES: dict[str, tuple[bytes, str | None, int]] = {
    "ok": (response(200, SSE, chunked(ROLE, TOKEN, TOKEN, DONE)), None, 2),
    "anthropic": (response(200, SSE, chunked(ANTHROPIC)), None, 1),
    "bad-json-event": (response(200, SSE, chunked(ROLE, b"data: {nope\n\n", TOKEN, DONE)), "malformed_sse", 1),
    "no-done": (response(200, SSE, chunked(ROLE, TOKEN)), "stream_incomplete", 1),
    "ends-inside-event": (response(200, SSE, chunked(ROLE, TOKEN, b'data: {"choices":')), "malformed_sse", 1),
    "error-event": (
        response(200, SSE, chunked(TOKEN, b'data: {"error":{"message":"boom"}}\n\n', DONE)),
        "stream_error",
        1,
    ),
    "cut-mid-stream": (response(200, SSE, chunked(ROLE, TOKEN, end=False)), "disconnect", 1),
    "bad-json-body": (response(200, "application/json", b"{nope", streamed=False), "malformed_body", 0),
    "server-error": (response(500, "application/json", b'{"error":{"message":"x"}}', streamed=False), "http_5xx", 0),
    "rate-limited": (response(429, "application/json", b'{"error":{"message":"x"}}', streamed=False), "http_429", 0),
}


def perfkit_driver(base: str) -> dict[str, list[object]]:
    results = {}
    for case in CASES:
        workload = Workload(url=f"{base}/{case}/v1/chat/completions", stream=True)
        lines = io.BytesIO()
        asyncio.run(
            run_phase(workload, LoadPlan(concurrency=1, requests=1, duration_s=None, timeout_s=10), jsonl=lines)
        )
        record = orjson.loads(lines.getvalue())
        results[case] = [record["error"], record["chunks"]]
    return results


def locust_user(base: str, workdir: Path) -> dict[str, list[object]]:
    locust = Path(sys.executable).parent / "locust"
    assert locust.exists(), f"locust is not installed beside the tests ({locust}): pip install -e '.[test]'"
    out = workdir / "cases.json"
    env = {**os.environ, "PERFKIT_TEST_CASES": ",".join(CASES), "PERFKIT_TEST_OUT": str(out)}
    locustfile = Path(__file__).resolve().parents[1] / "support" / "locust_cases.py"
    run = subprocess.run(
        [str(locust), "-f", str(locustfile), "--headless", "-u", "1", "-r", "1", "-t", "30s", "--host", base],
        cwd=workdir,
        env=env,
        capture_output=True,
        timeout=90,
    )
    assert out.exists(), run.stderr.decode()[-3000:]
    return {case: list(value) for case, value in orjson.loads(out.read_bytes()).items()}


@pytest.mark.integration
def test_both_drivers_read_every_answer_the_same(tmp_path: Path) -> None:
    with raw_server({case: answer for case, (answer, _, _) in CASES.items()}) as base:
        ours = perfkit_driver(base)
        theirs = locust_user(base, tmp_path)
    for case, (_, error, tokens) in CASES.items():
        assert theirs[case] == ours[case] == [error, tokens], (case, ours[case], theirs[case])
