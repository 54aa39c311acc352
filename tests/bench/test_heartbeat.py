from __future__ import annotations

import re
import threading

from litellm_perfkit._bench._heartbeat import waiting


def test_a_long_wait_says_what_it_is_for_and_how_long_it_has_taken() -> None:
    said: list[str] = []
    beaten = threading.Event()

    def say(line: str) -> None:
        said.append(line)
        if line.endswith(" s so far"):
            beaten.set()

    with waiting(say, "installing litellm", every_s=0.01):
        assert beaten.wait(30), said  # the wait lasts until the heartbeat has spoken, however slow the machine
    assert said[0] == "installing litellm ..."
    assert said[1:-1] and all(re.fullmatch(r"installing litellm: \d+ s so far", line) for line in said[1:-1]), said
    assert re.fullmatch(r"installing litellm: done in \d+ s", said[-1]), said


def test_nothing_is_said_without_a_listener() -> None:
    ran = []
    with waiting(None, "quiet", every_s=0.001):
        ran.append("body")
        assert "perfkit-heartbeat" not in [thread.name for thread in threading.enumerate()]  # no heartbeat at all
    assert ran == ["body"]
