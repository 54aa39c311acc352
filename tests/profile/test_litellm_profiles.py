"""perfkit run --stage-profile / --profile-dir on the real LiteLLM proxy."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.mock_server import mock_process
from tests.support.proxy import litellm_proxy

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

SECRET = "profile-token-for-tests"
MESSAGES = [{"role": "user", "content": "hello"}]


def test_stage_and_request_profiles_of_the_proxy(
    tmp_path: Path, validate_speedscope: Callable[[dict[str, Any]], None]
) -> None:
    stages_dir, requests_dir = tmp_path / "stages", tmp_path / "requests"
    with (
        mock_process("--ttft-ms", "2", "--chunks", "5") as upstream,
        litellm_proxy(
            "1.103.0",
            upstream,
            tmp_path,
            perfkit_args=("--stage-profile", str(stages_dir), "--profile-dir", str(requests_dir)),
            env={"PERFKIT_PROFILE_SECRET": SECRET},
        ) as proxy,
    ):
        client = openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-1234", max_retries=0)
        for i in range(60):
            if i % 2:
                list(client.chat.completions.create(model="fake-openai-endpoint", messages=MESSAGES, stream=True))
            else:
                client.chat.completions.create(model="fake-openai-endpoint", messages=MESSAGES)
        wrong = client.chat.completions.with_raw_response.create(
            model="fake-openai-endpoint", messages=MESSAGES, extra_headers={"x-perfkit-profile": "not-the-token"}
        )
        profiled = client.chat.completions.with_raw_response.create(
            model="fake-openai-endpoint", messages=MESSAGES, extra_headers={"x-perfkit-profile": SECRET}
        )
    # Per-request: only the right token, and its id names the files.
    assert "x-perfkit-profile-id" not in wrong.headers
    profile_id = profiled.headers["x-perfkit-profile-id"]
    assert sorted(p.name for p in requests_dir.iterdir()) == [f"{profile_id}.html", f"{profile_id}.speedscope.json"]
    assert "litellm" in (requests_dir / f"{profile_id}.html").read_text()
    # Per-stage: written by the worker when the proxy stopped.
    (speedscope,) = stages_dir.glob("stages-*.speedscope.json")
    document = json.loads(speedscope.read_text())
    validate_speedscope(document)
    frames = document["shared"]["frames"]
    by_stage = {p["name"]: {frames[i]["file"] for stack in p["samples"] for i in stack} for p in document["profiles"]}
    assert {"auth", "llm_call"} <= set(by_stage), sorted(by_stage)
    assert any("litellm/proxy/auth" in f for f in by_stage["auth"]), sorted(by_stage["auth"])[:20]
    assert not any("litellm/proxy/auth" in f for f in by_stage.get("stream.iterate", set()))
    assert list(stages_dir.glob("stages-*.auth.folded"))
