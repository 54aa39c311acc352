"""PERFKIT_LEAVE_OUT: the parts of perfkit run an ablation leaves out."""

from __future__ import annotations

import gc

import pytest

from litellm_perfkit._core import _gcwatch, _guard
from litellm_perfkit._core._leave_out import leave_out


def test_parts_and_points_are_read_and_unknown_parts_warned(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_guard, "_warned", set())
    assert leave_out("") == frozenset()
    assert leave_out(" points , point:auth,gcwatch") == {"points", "point:auth", "gcwatch"}
    assert leave_out("middlewares") == {"middlewares"}
    assert "PERFKIT_LEAVE_OUT names unknown parts middlewares" in caplog.text
    monkeypatch.setenv("PERFKIT_LEAVE_OUT", "shutdown,profiles")
    assert leave_out() == {"shutdown", "profiles"}


def test_the_collector_watch_can_be_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc, "callbacks", [c for c in gc.callbacks if c is not _gcwatch.WATCH])
    monkeypatch.setenv("PERFKIT_LEAVE_OUT", "gcwatch")
    _gcwatch.install()
    assert _gcwatch.WATCH not in gc.callbacks
    monkeypatch.delenv("PERFKIT_LEAVE_OUT")
    _gcwatch.install()
    assert _gcwatch.WATCH in gc.callbacks
