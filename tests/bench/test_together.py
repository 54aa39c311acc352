"""Bursts sent to two proxies at once (_bench/_together.py): exact counts on both sides,
the CPU of each charged to it, the order the sides start in, a failed request raised."""

from __future__ import annotations

import time
from typing import Any

import pytest

from litellm_perfkit._bench import _together
from litellm_perfkit._bench._bursts import Target
from litellm_perfkit._bench._launch import Children, start_mock
from litellm_perfkit._bench._together import SendOrder, send_together


def test_both_sides_get_exactly_their_requests_at_once_and_their_own_cpu() -> None:
    with Children() as children:
        urls, pids = [], []
        for _ in range(2):
            urls.append(start_mock(children, "--ttft-ms", "20", "--itl-ms", "0", "--chunks", "1", timeout_s=20))
            pids.append(children.children[-1].process.pid)
        began = time.monotonic()
        turns = send_together(
            [Target("a", urls[0], pids[0]), Target("b", urls[1], pids[1])],
            40,
            4,
            rounds=3,
            settle_s=0,
            prompt_repeats=1,
        )
        wall_s = time.monotonic() - began
    for side in ("a", "b"):
        served = turns.totals[side]
        assert served.requests == 120 and served.cpu_s is not None and served.cpu_s > 0
        assert served.agent_cpu_s == 0.0  # no perfkit export agent in a mock's tree
        rounds = turns.rounds[side]
        assert len(rounds) == 3 and all(cpu is not None and cpu > 0 for cpu in rounds)
    # 10 waves of 20 ms per side and round, at least; sent at once, the sides' times overlap: the rounds
    # take far less than the two sides' times together (sent in turns, they would take more).
    a, b = turns.totals["a"].seconds, turns.totals["b"].seconds
    assert 3 * 0.2 <= a and 3 * 0.2 <= b
    assert wall_s < 0.75 * (a + b), (wall_s, a, b)


@pytest.mark.parametrize(("order", "firsts"), [("fixed", "aaaa"), ("alternating", "abab")])
def test_the_side_started_first_in_each_round(monkeypatch: pytest.MonkeyPatch, order: SendOrder, firsts: str) -> None:
    started: list[str] = []
    run_phase = _together.run_phase

    async def noted(workload: Any, plan: Any) -> Any:
        started.append(workload.url)
        return await run_phase(workload, plan)

    monkeypatch.setattr(_together, "run_phase", noted)
    with Children() as children:
        targets = []
        for name, ttft_ms in (("a", "1"), ("b", "40")):
            url = start_mock(children, "--ttft-ms", ttft_ms, "--itl-ms", "0", "--chunks", "1", timeout_s=20)
            targets.append(Target(name, url, children.children[-1].process.pid))
        turns = send_together(targets, 6, 2, rounds=4, settle_s=0, prompt_repeats=1, order=order)
    names = {target.url: target.name for target in targets}
    assert "".join(names[url] for url in started[::2]) == firsts
    # Each side's results are its own: b's slower upstream (3 waves of 40 ms a round) is b's.
    assert turns.totals["b"].seconds >= 4 * 0.12 > 2 * turns.totals["a"].seconds


def test_a_failed_request_is_raised() -> None:
    with Children() as children:
        good = start_mock(children, "--ttft-ms", "1", "--itl-ms", "0", "--chunks", "1", timeout_s=20)
        good_pid = children.children[-1].process.pid
        bad = start_mock(children, "--error-500-fraction", "1", timeout_s=20)
        bad_pid = children.children[-1].process.pid
        with pytest.raises(RuntimeError, match="of 8 requests failed"):
            send_together([Target("a", good, good_pid), Target("b", bad, bad_pid)], 8, 2, 1, 0, 1)


def test_every_side_needs_a_process_to_charge() -> None:
    with pytest.raises(ValueError, match="needs a process"):
        send_together([Target("a", "http://127.0.0.1:1", None)], 1, 1, 1, 0, 1)
