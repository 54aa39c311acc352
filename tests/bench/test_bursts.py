"""Interleaved bursts (_bench/_bursts.py): the order, the counts, and the CPU they charge."""

from __future__ import annotations

from typing import Any

import pytest

from litellm_perfkit._bench import _bursts
from litellm_perfkit._bench._bursts import Burst, Served, Target, burst, burst_size, take_turns
from litellm_perfkit._bench._launch import Children, start_mock


def test_two_targets_take_turns_abba(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake_burst(url: str, *args: Any) -> Burst:
        calls.append(url)
        return Burst(10, 0.5)

    monkeypatch.setattr(_bursts, "burst", fake_burst)
    served = take_turns([Target("a", "A", None), Target("b", "B", None)], 10, 2, rounds=4, settle_s=0).totals
    assert calls == ["A", "B", "B", "A", "A", "B", "B", "A"]  # drift within a round falls on both alike
    assert served == {"a": Served(40, 2.0, None, None), "b": Served(40, 2.0, None, None)}
    assert served["a"].rps == 20.0 and served["a"].cpu_ms is None


def test_a_caller_may_send_the_bursts_and_keep_what_they_answered() -> None:
    sent: list[str] = []

    def send(target: Target) -> Burst:
        sent.append(target.name)
        return Burst(10, 0.25 if target.name == "a" else 0.5)

    turns = take_turns([Target("a", "A", None), Target("b", "B", None)], 10, 2, rounds=2, settle_s=0, send=send)
    assert sent == ["a", "b", "b", "a"]
    assert turns.totals["a"] == Served(20, 0.5, None, None) and turns.totals["b"].rps == 20.0


def test_more_targets_rotate_so_none_always_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(_bursts, "burst", lambda url, *args: calls.append(url) or Burst(1, 1.0))
    take_turns([Target(n, n, None) for n in "abc"], 1, 1, rounds=3, settle_s=0)
    assert calls == list("abcbcacab")  # each target in each position once


def test_a_burst_is_whole_waves_of_about_two_seconds() -> None:
    assert burst_size(130.0, 20) == 260  # 13 requests per user
    assert burst_size(45.0, 10) == 90
    assert burst_size(1.0, 20) == 20  # never less than one request per user


def test_a_burst_sends_exactly_its_requests_and_charges_the_cpu_of_the_process_tree() -> None:
    with Children() as children:
        url = start_mock(children, "--ttft-ms", "1", "--itl-ms", "0", "--chunks", "3", timeout_s=20)
        mock_pid = children.children[-1].process.pid
        done = burst(url, True, 37, 4, prompt_repeats=1)
        assert done.requests == 37 and done.seconds > 0
        served = take_turns([Target("mock", url, mock_pid)], 50, 5, rounds=2, settle_s=0.1, prompt_repeats=1).totals
    measured = served["mock"]
    assert measured.requests == 100
    assert measured.cpu_s is not None and measured.cpu_s > 0  # the mock served them
    assert measured.agent_cpu_s == 0.0  # no perfkit export agent in its tree
    assert measured.cpu_ms == pytest.approx(measured.cpu_s * 10) and measured.agent_ms == 0.0
