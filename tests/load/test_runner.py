"""How a load phase is stopped: by a signal at any moment, or by its parent."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Coroutine
from typing import Any

import pytest

from litellm_perfkit import _stop
from litellm_perfkit._load import LoadPlan, Workload
from litellm_perfkit._load._exchange import Exchange
from litellm_perfkit._load._http import Connection
from litellm_perfkit._load._runner import Phase, run_phase, run_phase_logged
from litellm_perfkit._load._workload import WorkloadError
from litellm_perfkit._stop import run_until_stopped
from litellm_perfkit.mock import Deployment, MockConfig, ModelProfile
from tests.support.mock_server import mock_server


def test_a_signal_before_the_loop_runs_still_starts_main_then_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_run_fast = _stop.run_fast

    def signalled_first(main: Coroutine[Any, Any, object]) -> object:
        os.kill(os.getpid(), signal.SIGTERM)  # handled here, before the loop exists
        return real_run_fast(main)

    monkeypatch.setattr(_stop, "run_fast", signalled_first)
    began: list[float] = []

    async def phase() -> None:
        began.append(time.monotonic())
        await asyncio.sleep(30)

    started = time.monotonic()
    assert run_until_stopped(phase()) == "SIGTERM"
    assert began and time.monotonic() - started < 5


def test_a_signal_while_the_loop_runs_stops_main() -> None:
    async def phase() -> None:
        asyncio.get_running_loop().call_later(0.2, os.kill, os.getpid(), signal.SIGHUP)
        await asyncio.sleep(30)

    before = signal.getsignal(signal.SIGHUP)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        started = time.monotonic()
        assert run_until_stopped(phase()) == "SIGHUP"
        assert time.monotonic() - started < 5
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL  # the previous action is back
    finally:
        signal.signal(signal.SIGHUP, before)


def test_the_parent_stops_it_without_a_signal() -> None:
    requested: list[bool] = []

    async def phase() -> None:
        asyncio.get_running_loop().call_later(0.2, requested.append, True)
        await asyncio.sleep(30)

    started = time.monotonic()
    assert run_until_stopped(phase(), stop_requested=lambda: bool(requested)) == "parent"
    assert time.monotonic() - started < 5


def test_a_phase_that_ends_reports_no_stop() -> None:
    async def phase() -> None:
        await asyncio.sleep(0.01)

    assert run_until_stopped(phase(), stop_requested=lambda: False) is None


def test_a_user_that_swallows_the_cancel_still_stops_before_its_next_request(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python 3.11's asyncio.wait_for returns the answer, and drops the cancel,
    # when both come at once; here every request does that.
    real_send = Connection.send

    async def swallowing_send(self: Connection, request: bytes, exchange: Exchange, timeout_s: float) -> None:
        try:
            await real_send(self, request, exchange, timeout_s)
        except asyncio.CancelledError:
            await asyncio.sleep(0.005)

    monkeypatch.setattr(Connection, "send", swallowing_send)
    phases: list[Phase] = []
    with mock_server(
        MockConfig(default=ModelProfile(chunks=2).validate(), deployments=(Deployment("d", 0),), seed=1)
    ) as (url,):

        async def stop_soon() -> None:
            asyncio.get_running_loop().call_later(0.5, os.kill, os.getpid(), signal.SIGTERM)
            await run_phase(
                Workload(url=url, prompt_repeats=2), LoadPlan(concurrency=4, duration_s=30), started=phases.append
            )

        started = time.monotonic()
        assert run_until_stopped(stop_soon()) == "SIGTERM"
    assert time.monotonic() - started < 5
    assert phases[0].recorder.ok > 0


def test_a_full_disk_under_the_per_request_lines_is_one_error_after_the_phase() -> None:
    """/dev/full: every write fails with ENOSPC, as on a full disk."""
    with mock_server(
        MockConfig(default=ModelProfile(chunks=2).validate(), deployments=(Deployment("d", 0),), seed=1)
    ) as (url,):
        plan = LoadPlan(concurrency=4, duration_s=None, requests=500)
        with pytest.raises(WorkloadError, match="^cannot write /dev/full: No space left on device$"):
            asyncio.run(run_phase_logged(Workload(url=url), plan, "/dev/full"))
