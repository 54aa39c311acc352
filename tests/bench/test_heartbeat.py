from __future__ import annotations

import time

from litellm_perfkit._bench._heartbeat import waiting


def test_a_long_wait_says_what_it_is_for_and_how_long_it_has_taken() -> None:
    said: list[str] = []
    with waiting(said.append, "installing litellm", every_s=0.05):
        time.sleep(0.18)
    assert said[0] == "installing litellm ..."
    assert any(line.startswith("installing litellm: ") and line.endswith(" s so far") for line in said[1:-1])
    assert said[-1].startswith("installing litellm: done in ")


def test_nothing_is_said_without_a_listener() -> None:
    with waiting(None, "quiet"):
        pass
