from __future__ import annotations

import orjson
import pytest

from litellm_perfkit._mock import Deployment, MockConfig, MockEngine, ModelProfile, Quota
from litellm_perfkit._mock._config import ConfigError

CHAT = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 40}]})


def engine(seed: int | None = None, **profile: object) -> MockEngine:
    config = MockConfig(default=ModelProfile(**profile).validate(), seed=seed)  # type: ignore[arg-type]
    return MockEngine(config, config.deployments[0])


def test_quota_admits_exactly_rpm_per_sliding_minute() -> None:
    now = [1000.0]
    quota = Quota(rpm=100, tpm=0, clock=lambda: now[0])
    admitted = sum(quota.admit(1) is None for _ in range(250))
    assert admitted == 100
    now[0] += 59.9
    assert quota.admit(1) == pytest.approx(0.1)
    now[0] += 0.2  # the first 100 leave the window
    assert sum(quota.admit(1) is None for _ in range(250)) == 100


def test_tpm_quota_counts_prompt_and_completion_tokens() -> None:
    quota = Quota(rpm=0, tpm=1000, clock=lambda: 0.0)
    assert [quota.admit(300) is None for _ in range(4)] == [True, True, True, False]


def test_quota_429_carries_retry_after() -> None:
    config = MockConfig(deployments=(Deployment("d", 0, rpm=2),))
    mock = MockEngine(config, config.deployments[0])
    plans = [mock.plan("POST", "/v1/chat/completions", CHAT) for _ in range(3)]
    assert [p.status for p in plans] == [200, 200, 429]
    assert dict(plans[2].headers)[b"retry-after"] == b"60"
    assert orjson.loads(plans[2].render(0))["error"]["code"] == "rate_limit_exceeded"  # type: ignore[misc]


@pytest.mark.parametrize(("field", "status"), [("error_500_fraction", 500), ("error_429_fraction", 429)])
def test_injected_error_rates_fall_within_tolerance(field: str, status: int) -> None:
    mock = engine(seed=7, **{field: 0.2})
    n = 5000
    hits = sum(mock.plan("POST", "/v1/chat/completions", CHAT).status == status for _ in range(n))
    # Binomial(5000, 0.2): standard deviation 28; 4 sigma.
    assert abs(hits - 0.2 * n) < 4 * (n * 0.2 * 0.8) ** 0.5


def test_timeout_and_disconnect_faults() -> None:
    mock = engine(seed=3, timeout_fraction=0.5, disconnect_fraction=0.5)
    actions = {mock.plan("POST", "/v1/chat/completions", CHAT).action for _ in range(50)}
    assert actions == {"hang", "disconnect"}
    stream = orjson.dumps({"model": "m", "messages": [], "stream": True})
    cut = [
        p for p in (mock.plan("POST", "/v1/chat/completions", stream) for _ in range(50)) if p.action == "disconnect"
    ]
    assert cut and all(p.streaming and 1 <= p.disconnect_after <= 20 for p in cut)


def test_a_seed_makes_runs_deterministic() -> None:
    def run(seed: int) -> list[tuple[int, tuple[float, ...] | None]]:
        mock = engine(seed=seed, ttft_ms=50, itl_ms=10, distribution="exponential", jitter_ms=2, error_500_fraction=0.1)
        body = orjson.dumps({"model": "m", "messages": [], "stream": True})
        plans = [mock.plan("POST", "/v1/chat/completions", body) for _ in range(200)]
        return [(p.status, tuple(p.offsets_s) if p.offsets_s else None) for p in plans]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_fixed_profile_timing_and_max_tokens() -> None:
    mock = engine(ttft_ms=50, itl_ms=10, chunks=5)
    stream = mock.plan("POST", "/v1/chat/completions", orjson.dumps({"model": "m", "messages": [], "stream": True}))
    # role at 0, content at 50..90 ms, then finish and [DONE] with the last chunk
    assert stream.offsets_s == pytest.approx([0, 0.05, 0.06, 0.07, 0.08, 0.09, 0.09, 0.09])
    plain = mock.plan("POST", "/v1/chat/completions", orjson.dumps({"model": "m", "messages": [], "max_tokens": 2}))
    body = orjson.loads(plain.render(0))  # type: ignore[misc]
    assert plain.at_s == pytest.approx(0.06)
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param"),
    [
        ("POST", "/v1/chat/completions", b"{not json", 400, None),
        ("POST", "/v1/chat/completions", b"[]", 400, None),
        ("POST", "/v1/chat/completions", b'{"messages": []}', 400, "model"),
        ("POST", "/v1/chat/completions", b'{"model": "m"}', 400, "messages"),
        ("POST", "/v1/embeddings", b'{"model": "m"}', 400, "input"),
        ("GET", "/v1/chat/completions", b"", 405, None),
        ("POST", "/v1/nothing", b"{}", 404, None),
    ],
)
def test_malformed_requests_get_openai_style_4xx(
    method: str, path: str, body: bytes, status: int, param: str | None
) -> None:
    plan = engine().plan(method, path, body)
    error = orjson.loads(plan.render(0))["error"]  # type: ignore[misc]
    assert plan.status == status and error["message"] and error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_bad_profiles_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ConfigError, match="fault fractions"):
        ModelProfile(error_500_fraction=0.7, error_429_fraction=0.7).validate()
    with pytest.raises(ConfigError, match="ttft_ms must be >= 0"):
        ModelProfile(ttft_ms=-1).validate()


def test_a_malformed_answer_cuts_one_event_or_the_body() -> None:
    mock = engine(seed=3, malformed_fraction=1.0, chunks=4)
    stream = orjson.dumps({"model": "m", "messages": [], "stream": True})
    plan = mock.plan("POST", "/v1/chat/completions", stream)
    assert plan.action == "malformed" and plan.render is not None and plan.offsets_s is not None
    events = [plan.render(seq) for seq in range(len(plan.offsets_s))]
    bad = [seq for seq, event in enumerate(events) if b"malformed" in event]
    assert bad == [plan.disconnect_after] and 1 <= plan.disconnect_after <= 4
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(events[bad[0]].removeprefix(b"data: "))
    assert events[-1] == b"data: [DONE]\n\n"  # the stream goes on to its end
    body = mock.plan("POST", "/v1/chat/completions", CHAT)
    assert body.action == "malformed" and body.render is not None
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(body.render(0))
