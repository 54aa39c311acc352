"""perfkit bench --instances: what each instance answered, from perfkit's
Prometheus page, and the spend logs checked against it (_bench/_instances.py,
_bench/_render_deploy.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from typing import Any

import pytest

from litellm_perfkit._bench import run_bench
from litellm_perfkit._bench._instances import chat_answers, start_instances
from litellm_perfkit._bench._launch import Children, ChildrenClosed
from litellm_perfkit._bench._render_deploy import deployment_lines, spend_check
from tests.support import procfs
from tests.support.bench import short_bench

PAGE = """\
# HELP perfkit_requests_total Requests served.
# TYPE perfkit_requests_total counter
perfkit_requests_total{error_type="",http_request_method="POST",http_response_status_code="200",http_route="/v1/chat/completions",perfkit_recorded="true"} 40
perfkit_requests_total{error_type="",http_request_method="POST",http_response_status_code="200",http_route="/v1/chat/completions",perfkit_recorded="false"} 2
perfkit_requests_total{error_type="http_429",http_request_method="POST",http_response_status_code="429",http_route="/v1/chat/completions",perfkit_recorded="true"} 7
perfkit_requests_total{error_type="",http_request_method="POST",http_response_status_code="200",http_route="/key/generate",perfkit_recorded="true"} 1
perfkit_request_duration_seconds_count{http_route="/v1/chat/completions",http_response_status_code="200"} 42
"""


def test_the_chat_requests_an_instance_answered_are_counted_by_status() -> None:
    assert chat_answers(PAGE) == {"200": 42, "429": 7}
    assert chat_answers("") == {}


def test_instances_start_side_by_side_and_come_back_in_order() -> None:
    both_started = threading.Barrier(2, timeout=5)

    def start(i: int) -> Any:
        both_started.wait()  # neither returns before the other has started
        return f"instance {i}"

    assert start_instances(2, start) == ["instance 0", "instance 1"]


def test_a_failed_start_is_raised_without_waiting_for_the_others() -> None:
    release = threading.Event()

    def start(i: int) -> Any:
        if i == 0:
            raise RuntimeError("instance 0 did not start")
        release.wait(30)  # a start that would wait long: the caller's Children end it
        return i

    with pytest.raises(RuntimeError, match="instance 0 did not start"):
        start_instances(2, start)
    release.set()


# A bench stopped while its proxies start: one start blocked for good (on a venv's lock, in a pip).
_BLOCKED_START = textwrap.dedent(
    """
    import signal, sys, threading
    from litellm_perfkit._bench._instances import start_instances
    from litellm_perfkit._stop import Stopped, stop_signals

    both = threading.Barrier(2)

    def start(index):
        both.wait()
        if index == 0:
            print("blocked", flush=True)
            if sys.argv[1] == "start thread":  # as the kernel may: the signal to a thread that is not the main one
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        threading.Event().wait()

    with stop_signals():
        try:
            start_instances(2, start)
        except Stopped:
            sys.exit(143)
    """
)


@pytest.mark.parametrize("signalled", ["process", "start thread"])
def test_a_stopped_bench_exits_without_waiting_for_a_blocked_start(signalled: str) -> None:
    # A pool's worker threads are joined at exit: a start blocked in a pip kept the bench alive. A signal
    # the kernel gives a start thread is acted on at once too, not when a start ends.
    process = subprocess.Popen([sys.executable, "-c", _BLOCKED_START, signalled], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "blocked\n"
        if signalled == "process":
            process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert process.wait(timeout=10) == 143
        assert time.monotonic() - started < 5
    finally:
        process.kill()
        process.wait()


def test_a_child_a_start_asks_for_after_the_stop_is_refused() -> None:
    # A start still running when the bench stopped its children went on to start its proxy.
    token = f"perfkit-late-child-{uuid.uuid4().hex}"
    left, done = threading.Event(), threading.Event()
    refused: list[BaseException] = []

    def start(index: int) -> Any:
        if index == 0:
            raise RuntimeError("instance 0 did not start")
        left.wait(10)
        try:
            return children.start("late", [sys.executable, "-c", "import time; time.sleep(30)", token])
        except ChildrenClosed as exc:
            refused.append(exc)
            raise
        finally:
            done.set()

    with pytest.raises(RuntimeError, match="instance 0 did not start"), Children() as children:
        start_instances(2, start)
    left.set()
    assert done.wait(10)
    assert [str(e) for e in refused] == ["late: not started, its bench is stopping"]
    assert children.children == []
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and token.encode() in procfs.command(int(pid))]
    with pytest.raises(ChildrenClosed):  # in the caller's thread too
        children.start("late", [sys.executable, "-c", "pass"])


def test_the_report_lists_each_instance_and_their_sum() -> None:
    run: Any = {
        "instances": [
            {"url": "http://127.0.0.1:1", "answered": {"200": 33, "429": 19}},
            {"url": "http://127.0.0.1:2", "answered": {"200": 32}},
        ]
    }
    [line] = [line for line in deployment_lines(run) if line]
    assert line == (
        "2 instances, the load spread by the driver; chat requests answered: http://127.0.0.1:1 33 x 200, 19 x 429; "
        "http://127.0.0.1:2 32 x 200; all together 65 x 200, 19 x 429"
    )


def _deployment(rows: int, successes: int, answered: int) -> Any:
    return {"spend_log_rows": rows, "spend_log_successes": successes, "answered": answered}


def test_spend_logs_equal_to_the_requests_answered_are_said_so() -> None:
    line = spend_check(_deployment(50, 42, 42))
    assert line is not None and "equal to the 42 chat requests the proxies answered 200" in line
    assert "warning" not in line


def test_spend_logs_that_differ_from_the_requests_answered_are_a_warning() -> None:
    line = spend_check(_deployment(40, 40, 42))
    assert line is not None
    assert "warning: spend logs DIFFER from the requests answered: 40 success rows for 42" in line
    assert "+2 requests without a row" in line


def test_without_a_database_nothing_is_said() -> None:
    assert spend_check({"spend_log_rows": None, "spend_log_successes": None, "answered": None}) is None  # type: ignore[typeddict-item]


RPM = 10  # per deployment: the load sends several times the 2 x 10 a minute the limits allow
USERS = 6


@pytest.mark.integration
@pytest.mark.litellm
def test_two_instances_share_the_rate_limits_the_database_and_the_attribution() -> None:
    """One bench on the real proxy (1.103.0): two instances behind one
    PostgreSQL and one Redis, the rate-limited scenario, both keys."""
    options = short_bench(
        litellm_versions=("1.103.0",),
        deployment="postgres+redis",
        instances=2,
        scenario="rate-limited-deployments",
        rpm=RPM,
        concurrency=USERS,
        stream_concurrency=4,
        duration_s=8.0,
        warmup_s=2.0,
    )
    document = run_bench(options)
    instances = document["instances"]
    # The driver spread the load: each instance answered, and each met the shared limits.
    assert len(instances) == 2
    assert all(i["answered"].get("200", 0) > 0 and i["answered"].get("429", 0) > 0 for i in instances), instances
    # The attribution joins both instances' spans (one worker each).
    assert document["workers_seen"] == 2
    assert document["joined_requests"] >= 0.9 * sum(
        m["ok"] + m["rate_limited"] for m in document["rate_limits"]["minutes"]
    )
    # The limits held across both instances: per minute, and over the run, where
    # the warm-ups (2 s before each phase) count too. Counted per instance, they
    # would have let twice as many through.
    limits = document["rate_limits"]
    assert limits["held"], limits
    minutes = {m["minute"] for m in limits["minutes"]}
    first = min(m["minute"] for m in limits["minutes"])
    hour, minute = map(int, first.split(":"))
    minutes.add(f"{hour:02d}:{minute - 1:02d}" if minute else f"{(hour - 1) % 24:02d}:59")  # the first warm-up's
    answered_ok = sum(i["answered"].get("200", 0) for i in instances)
    assert answered_ok <= 2 * RPM * len(minutes) + USERS, (answered_ok, minutes)
    # Every answered request left its spend log.
    deployment = document["deployment"]
    assert deployment["spend_log_successes"] == deployment["answered"] == answered_ok
    # auth's own CPU with each key, with the difference's interval.
    auth = document["keys"]["stages"][0]
    assert auth["stage"] == "auth" and auth["master_ms"] > 0 and auth["virtual_ms"] > 0
    assert auth["low_ms"] is not None and auth["high_ms"] is not None and auth["low_ms"] <= auth["high_ms"]
    assert min(document["keys"]["requests"].values()) > 0
