"""perfkit's exact histograms inside Locust: per process, shipped to the master, merged.

Every Locust process keeps a perfkit ``Recorder``. A worker sends it with
each stats report (``report_to_master``) and starts a new one; the master
adds the counts (``worker_report``): log-linear histograms merge exactly, so
the master's percentiles are those of all requests, not a mean of workers'
percentiles. At ``test_stop`` the master (or a lone process) writes the
``perfkit.load/1`` document to ``--perfkit-result``, and writes it again for
each report that arrives later: Locust workers send their last report only
when the master quits, after ``test_stop``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson
from locust import events
from locust.env import Environment
from locust.runners import WorkerRunner

from .._wire._environment_variables import (
    PERFKIT_API_KEY,
    PERFKIT_ENTRIES,
    PERFKIT_JSONL_DIR,
    PERFKIT_MAX_TOKENS,
    PERFKIT_MODEL,
    PERFKIT_PATH,
    PERFKIT_PROMPT_REPEATS,
    PERFKIT_RESULT,
    PERFKIT_STREAM,
    PERFKIT_WARMUP,
)
from ..types import LoadConfig, LoadResult
from ._exchange import Exchange
from ._recorder import Recorder
from ._report import build_result, render_table

__all__ = ["ENTRY_KINDS", "STATE", "add_options", "extra_entries"]

ENTRY_KINDS = ("ttft", "chunk_gap", "overhead", "stage")


def add_options(parser: Any, **_: Any) -> None:
    """The ``--perfkit-*`` options; each also reads a ``PERFKIT_*`` variable."""
    # LocustArgumentParser.add_argument itself (not an argument group's) knows include_in_web_ui and is_secret.
    parser.add_argument(
        "--perfkit-model", env_var=PERFKIT_MODEL, default="fake-openai-endpoint", help="model name to request"
    )
    parser.add_argument(
        "--perfkit-stream",
        env_var=PERFKIT_STREAM,
        choices=("on", "off"),
        default="on",
        help="stream responses (TTFT and chunk gaps are measured only when on)",
    )
    parser.add_argument(
        "--perfkit-prompt-repeats",
        env_var=PERFKIT_PROMPT_REPEATS,
        type=int,
        default=150,
        help="the prompt is a uuid plus LiteLLM's load-test sentence, this many times (150: about 2,700 tokens)",
    )
    parser.add_argument(
        "--perfkit-max-tokens", env_var=PERFKIT_MAX_TOKENS, type=int, default=0, help="max_tokens (0: not sent)"
    )
    parser.add_argument("--perfkit-path", env_var=PERFKIT_PATH, default="/v1/chat/completions", help="endpoint path")
    parser.add_argument(
        "--perfkit-api-key",
        env_var=PERFKIT_API_KEY,
        default="",
        is_secret=True,
        help="bearer key (default: $API_KEY, else sk-1234)",
    )
    parser.add_argument(
        "--perfkit-entries",
        env_var=PERFKIT_ENTRIES,
        default="",
        help="extra Locust entries beside each request, comma-separated: "
        + ", ".join(ENTRY_KINDS)
        + " (default: none, so Locust's Aggregated row counts requests; perfkit's table has them all)",
    )
    parser.add_argument(
        "--perfkit-warmup",
        env_var=PERFKIT_WARMUP,
        type=float,
        default=0.0,
        include_in_web_ui=False,
        help="seconds after the test starts (in each process) that perfkit's histograms ignore",
    )
    parser.add_argument(
        "--perfkit-result",
        env_var=PERFKIT_RESULT,
        default="",
        include_in_web_ui=False,
        help="write the merged perfkit.load/1 document here when the test stops",
    )
    parser.add_argument(
        "--perfkit-jsonl-dir",
        env_var=PERFKIT_JSONL_DIR,
        default="",
        include_in_web_ui=False,
        help="each process writes one JSON line per request to DIR/locust-PID.jsonl",
    )


def extra_entries(options: Any) -> frozenset[str]:
    """The ``--perfkit-entries`` kinds; unknown names are ignored (Locust has already parsed its options)."""
    text = str(getattr(options, "perfkit_entries", "") or "")
    return frozenset(kind.strip() for kind in text.split(",")) & frozenset(ENTRY_KINDS)


class _State:
    """This process's share of the measurement (one per Locust process)."""

    def __init__(self) -> None:
        self.jsonl: IO[bytes] | None = None
        self.reset()

    def reset(self) -> None:
        if self.jsonl is not None:
            self.jsonl.close()
        self.recorder = Recorder()
        self.first_wall = 0.0  # wall clock: the only clock shared across hosts
        self.last_wall = 0.0
        self.cpu_mark = time.process_time()
        self.cpu_s = 0.0
        self.processes: set[str] = set()
        self.jsonl = None
        self.warmup_until = 0.0  # wall clock: test start + --perfkit-warmup
        self.options: Any = None
        self.stopped: Environment | None = None  # set at test_stop on the master

    def start(self, environment: Environment) -> None:
        self.reset()
        self.options = environment.parsed_options
        self.warmup_until = time.time() + float(getattr(self.options, "perfkit_warmup", 0.0) or 0.0)

    def record(self, exchange: Exchange, streaming: bool, started_wall: float) -> None:
        if started_wall < self.warmup_until:
            return
        if not self.first_wall:
            self.cpu_mark = time.process_time()
        directory = getattr(self.options, "perfkit_jsonl_dir", "")
        if directory and self.jsonl is None:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.jsonl = open(Path(directory) / f"locust-{os.getpid()}.jsonl", "ab")  # noqa: SIM115 - closed at test_stop
            self.recorder.start_ns = exchange.intended_ns
        self.recorder.jsonl = self.jsonl
        self.first_wall = self.first_wall or started_wall
        self.last_wall = time.time()
        self.recorder.record(exchange, streaming)

    def take(self) -> dict[str, Any]:
        """This process's data since the last take, for the master."""
        now = time.process_time()
        data = {
            "recorder": self.recorder.to_dict(),
            "first": self.first_wall,
            "last": self.last_wall,
            "cpu_s": now - self.cpu_mark if self.first_wall else 0.0,
            "pid": f"{os.uname().nodename}:{os.getpid()}",
        }
        self.cpu_mark = now
        self.recorder = Recorder(self.jsonl, self.recorder.start_ns)
        return data

    def merge(self, data: dict[str, Any]) -> None:
        self.recorder.merge_dict(data["recorder"])
        if data["first"]:
            self.first_wall = min(self.first_wall or data["first"], data["first"])
        self.last_wall = max(self.last_wall, data["last"])
        self.cpu_s += data["cpu_s"]
        if data["recorder"]["requests"]:
            self.processes.add(data["pid"])

    def result(self, environment: Environment) -> LoadResult:
        options = environment.parsed_options
        users = getattr(options, "num_users", None)
        config: LoadConfig = {
            "driver": "locust",
            "url": f"{(environment.host or '').rstrip('/')}{getattr(options, 'perfkit_path', '')}",
            "models": [[getattr(options, "perfkit_model", ""), 1.0]],
            "stream": getattr(options, "perfkit_stream", "on") == "on",
            "max_tokens": getattr(options, "perfkit_max_tokens", 0) or None,
            "prompt_repeats": getattr(options, "perfkit_prompt_repeats", 150),
            "mode": "closed",
            "concurrency": users,
            "warmup_s": getattr(options, "perfkit_warmup", 0.0),
            "processes": len(self.processes) or 1,
        }
        duration = max(self.last_wall - self.first_wall, 0.0)
        return build_result(self.recorder, duration, self.cpu_s, duration, len(self.processes) or 1, config)


STATE = _State()


@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    STATE.start(environment)


@events.report_to_master.add_listener
def _on_report_to_master(client_id: str, data: dict[str, Any], **_: Any) -> None:
    data["perfkit"] = STATE.take()


@events.worker_report.add_listener
def _on_worker_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
    if "perfkit" in data:
        STATE.merge(data["perfkit"])
        if STATE.stopped is not None:
            _write_result(STATE.stopped)


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        if STATE.jsonl is not None:
            STATE.jsonl.flush()
        return
    if STATE.recorder.requests and not STATE.processes:  # a lone process: its own data
        STATE.merge(STATE.take())
    STATE.stopped = environment
    _write_result(environment)
    if STATE.recorder.requests:
        print("perfkit (exact, all processes so far):\n" + render_table(STATE.result(environment)), file=sys.stderr)
    if STATE.jsonl is not None:
        STATE.jsonl.flush()


def _write_result(environment: Environment) -> None:
    path = getattr(environment.parsed_options, "perfkit_result", "")
    if path:
        Path(path).write_bytes(orjson.dumps(STATE.result(environment), option=orjson.OPT_INDENT_2))
