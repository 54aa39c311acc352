"""Run a load phase through Locust (headless) with perfkit's user; return the
same ``perfkit.load/1`` document as ``run_load``, plus Locust's own entries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, cast

import orjson

from .._executables import find_executable
from .._stop import signal_name
from .._wire._environment_variables import PERFKIT_API_KEY
from ..types import LoadResult, LocustEntry
from ._report import stopped
from ._runner import LoadPlan
from ._workload import Workload, WorkloadError

__all__ = ["LocustError", "run_locust", "locust_executable"]

_LOCUSTFILE = Path(__file__).with_name("_locustfile.py")


class LocustError(RuntimeError):
    """Locust could not run the phase; the message says why."""


def _kill(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def locust_executable() -> str:
    found = find_executable("locust")
    if found is None:
        raise LocustError("--driver locust needs Locust: pip install 'litellm_perfkit[locust]'")
    return found


def _percentile(response_times: dict[str, int], total: int, q: float) -> float | None:
    """Locust's own percentile: from its rounded response-time buckets."""
    if not total:
        return None
    rank, seen = q * total, 0
    for value in sorted(response_times, key=float):
        seen += response_times[value]
        if seen >= rank:
            return float(value)
    return None


def _entries(stats: list[dict[str, Any]]) -> list[LocustEntry]:
    out: list[LocustEntry] = []
    for entry in stats:
        count = entry["num_requests"]
        times = entry.get("response_times", {})
        out.append(
            {
                "type": entry["method"],
                "name": entry["name"],
                "requests": count,
                "failures": entry["num_failures"],
                "mean_ms": round(entry["total_response_time"] / count, 3) if count else None,
                "p50_ms": _percentile(times, count, 0.50),
                "p95_ms": _percentile(times, count, 0.95),
                "p99_ms": _percentile(times, count, 0.99),
                "max_ms": entry.get("max_response_time"),
            }
        )
    return out


def _master_stats(stdout: str) -> list[dict[str, Any]]:
    """The master's ``--json`` stats: with --processes, each worker prints its
    own (empty) list to the same stdout first, so take the last non-empty one."""
    decoder, position, found = json.JSONDecoder(), 0, []
    while (start := stdout.find("[", position)) >= 0:
        try:
            value, position = decoder.raw_decode(stdout, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if isinstance(value, list) and value and all(isinstance(e, dict) and "num_requests" in e for e in value):
            found = value
    return found


def _locust_command(
    workload: Workload, plan: LoadPlan, run_s: float, processes: int, result_path: Path, jsonl_dir: Path
) -> list[str]:
    """Locust's command line for one phase of ``run_s`` seconds, warm-up included: perfkit's
    locustfile, writing its result to ``result_path``."""
    users = plan.concurrency or 1
    command = [
        locust_executable(),
        "-f",
        str(_LOCUSTFILE),
        "--headless",
        "--only-summary",
        "--json",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{max(1, round(run_s))}s",
        "--host",
        f"http://{workload.host}:{workload.port}",
        "--stop-timeout",
        "5",
        "--perfkit-path",
        workload.path,
        "--perfkit-model",
        workload.models[0][0],
        "--perfkit-stream",
        "on" if workload.stream else "off",
        "--perfkit-prompt-repeats",
        str(workload.prompt_repeats),
        "--perfkit-max-tokens",
        str(workload.max_tokens or 0),
        "--perfkit-warmup",
        str(plan.warmup_s),
        "--perfkit-result",
        str(result_path),
        "--perfkit-jsonl-dir",
        str(jsonl_dir),
        # Locust's view of what perfkit measures too, folded into the result (not per chunk: too many rows).
        "--perfkit-entries",
        "ttft,overhead,stage",
    ]
    if processes > 1:
        command += ["--processes", str(processes)]
    return command


def run_locust(workload: Workload, plan: LoadPlan, processes: int = 1, jsonl_path: str | None = None) -> LoadResult:
    """One closed-loop phase of ``plan.concurrency`` Locust users for
    ``plan.warmup_s + plan.duration_s`` seconds; the warm-up is left out of
    perfkit's histograms (Locust's own entries keep it)."""
    if plan.mode != "closed" or plan.requests or not plan.duration_s:
        raise WorkloadError("--driver locust runs closed-loop phases by duration (no --rate, no --requests)")
    if len(workload.models) != 1:
        raise WorkloadError("--driver locust sends one model per phase")
    with tempfile.TemporaryDirectory(prefix="perfkit-locust-") as tmp:
        result_path, jsonl_dir = Path(tmp) / "result.json", Path(tmp) / "jsonl"
        command = _locust_command(workload, plan, plan.warmup_s + plan.duration_s, processes, result_path, jsonl_dir)
        env = {**os.environ, PERFKIT_API_KEY: workload.api_key or ""}
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        stop: KeyboardInterrupt | None = None
        try:
            stdout, stderr = process.communicate(timeout=plan.warmup_s + plan.duration_s + plan.timeout_s + 60)
        except KeyboardInterrupt as exc:
            # Ctrl-C, SIGTERM, SIGHUP: Locust stops its test on SIGTERM and writes perfkit's result.
            stop = exc
            os.killpg(process.pid, signal.SIGTERM)
            try:
                stdout, stderr = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                _kill(process)
                raise exc from None
        except BaseException:  # a timeout: stop Locust and its worker processes
            _kill(process)
            raise
        if stop is not None and not result_path.exists():
            raise stop
        if not result_path.exists():
            tail = "\n".join(stderr.decode(errors="replace").strip().splitlines()[-15:])
            raise LocustError(
                f"locust exited with code {process.returncode} and wrote no result; its log ends:\n{tail}"
            )
        result = cast(LoadResult, orjson.loads(result_path.read_bytes()))
        if stop is not None:
            result = stopped(result, signal_name(stop))
        result["locust"] = _entries(_master_stats(stdout.decode(errors="replace")))
        if jsonl_path is not None and jsonl_dir.exists():
            with open(jsonl_path, "ab") as out:
                for part in sorted(jsonl_dir.glob("*.jsonl")):
                    out.write(part.read_bytes())
    return result
