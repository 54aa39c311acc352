"""Issue 31's run: the real proxy (1.103.0, 2 workers) under more than three
times the workers' combined record cap, with refused keys and upstream 5xx,
scraped by Debian's Prometheus; beside it the same proxy recording every
request, sent the same load at the same moments. The cap is 1.5 requests a
second per worker, not the default 10: three times the default (60/s) is
more than LiteLLM serves on a 2-core machine beside its mock, the driver and
Prometheus (58.6 of 69.7/s served, once), twice 20/s (the two proxies) fell
behind at a load average of 11-18, and a proxy that falls behind queues
requests before the middleware sees them, which no server-side histogram can
match. The record choice is the same code at any rate:

- perfkit_requests_total per status code equals the requests sent, exactly;
- the auth stage's weighted count is the requests that reached auth, within 5%;
- the request duration's p50 and p95 fall in the bucket of the driver's on
  /metrics; through PromQL, over a 60 s window of the run, in a bucket that
  the driver's latencies meet at ranks near q (the window's requests are a
  part of the run's); PromQL's request rate is the driver's within a
  snapshot interval's traffic over the window (1.7%);
- every request with a sampled traceparent has its server span, every one with
  the secret has Server-Timing, and LiteLLM never saw the secret's header
  (a custom provider reports the headers LiteLLM handed it);
- a ``--record-rate all`` proxy's p50 of auth over every request stands
  within 3.3 standard errors of rank of the weighted sample's p50 (over the
  spans, each its adjusted count times), and its histogram's p50 bucket
  among the weighted histogram's at those ranks, both widened by 10% or by
  as much as the two proxies' auth differed on the requests both record. That
  proxy is up at the same time and gets the same drivers at the same
  moments: two proxies run one after the other differ by 10-15% here (other
  work shares the 2 cores); taken together they meet the same neighbours.

The mock fails a few requests with 500 and LiteLLM is told not to retry: a
retry costs the proxy a request's work, and the proxy must keep up for its
histogram (which starts when the middleware has the request) to match the
client's."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from litellm_perfkit._bench._launch import free_port
from litellm_perfkit._core._layouts import BOUNDARIES_NS
from litellm_perfkit._core._sampling import effective_size, rank_standard_error, weighted_quantile
from litellm_perfkit._export._prometheus import SNAPSHOT_INTERVAL_S
from tests.support.mock_server import mock_process
from tests.support.prometheus import scrape, serving_metrics
from tests.support.proxy import litellm_proxy
from tests.support.servers import prometheus_process

# Quiet: two proxies compared, which a neighbouring test's load can slow unevenly (auth p50 7.40 against
# 4.10 ms once in CI, beside another test on the 2 cores).
pytestmark = [pytest.mark.integration, pytest.mark.litellm, pytest.mark.quiet]

WORKERS, CAP = 2, 1.5  # the record rate, per worker
GOOD, REFUSED, TRACED, SECRET = 7, 1, 1, 1  # requests a second of each kind, together 3.3x the cap
SECONDS, WINDOW_S = 75, 60  # a window of [1m], as the PromQL reads the rate
KEY, HEADER_SECRET = "sk-1234", "perfkit-test-secret"
# The driver times the client and its socket too: its quantile may sit a few ms past the server's bucket.
_SLACK_NS = 3e6
Z = 3.3  # standard errors: a rank outside them comes once in a thousand runs
# Two proxies under one load differ beside the sample's error: auth p50 3.06 against 3.16-3.93 ms at
# the sample's band in one CI run. Issue 31 allows 10% between them, taken on the band's values.
BETWEEN_PROXIES = 1.10
CHAT = 'http_route=~".*/chat/completions"'

REPORTER = """
import json

from litellm import CustomLLM
from litellm.types.utils import ModelResponse


class Reporter(CustomLLM):
    async def acompletion(self, *args, **kwargs):
        request = (kwargs.get("litellm_params") or {}).get("proxy_server_request") or {}
        names = sorted(str(name).lower() for name in request.get("headers") or {})
        message = {"role": "assistant", "content": json.dumps(names)}
        return ModelResponse(model="headers", choices=[{"message": message, "index": 0, "finish_reason": "stop"}])


handler = Reporter()
"""

CONFIG = f"""model_list:
  - model_name: fake-openai-endpoint
    litellm_params:
      model: openai/fake
      api_base: {{upstream}}/v1
      api_key: fake-key
      max_retries: 0
  - model_name: headers
    litellm_params:
      model: reporter/x
litellm_settings:
  num_retries: 0
  custom_provider_map:
    - {{"provider": "reporter", "custom_handler": custom_handler.handler}}
general_settings:
  master_key: {KEY}
"""


def driver(url: str, rate: float, seconds: float, out: Path, key: str = KEY, traceparent: str = "off") -> Any:
    """``perfkit load`` in its own process. No traceparent by default: the record rate decides (a sampled
    parent is recorded past it), and the trace sampler keeps the spans (it drops an unsampled parent's)."""
    command = [sys.executable, "-m", "litellm_perfkit._cli", "load", "--prompt-repeats", "5", "--progress", "off"]
    command += ["--traceparent", traceparent, "--duration", f"{seconds}s", "--rate", str(rate)]
    command += ["--concurrency", "100", "--timeout", "30s", "--url", url, "--out", str(out)]
    return subprocess.Popen(
        command,
        env={**os.environ, "PERFKIT_API_KEY": key},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.open()]


@contextlib.contextmanager
def proxy(upstream: str, workdir: Path, spans: Path, record_rate: str, port: int) -> Iterator[str]:
    workdir.mkdir()
    (workdir / "custom_handler.py").write_text(REPORTER)
    args = ("--record-rate", record_rate, *serving_metrics(port, "--exporter", "jsonl", "--out", str(spans)))
    with litellm_proxy("1.103.0", upstream, workdir, workers=WORKERS, perfkit_args=args, config=CONFIG) as url:
        yield url


def wait_for_spans(port: int, spans: Path) -> None:
    """Until every recorded request's server span is in the file (the export agent runs behind on a busy machine)."""
    deadline = time.monotonic() + 60
    while True:
        recorded = sum(
            s.value
            for s in scrape(port)["perfkit_requests"].samples
            if s.labels.get("perfkit_recorded") == "true" and s.name.endswith("_total")
        )
        exported = sum(1 for line in spans.read_bytes().splitlines() if b'"kind":2' in line)
        if exported >= recorded or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def chat_samples(families: dict[str, Any], family: str, suffix: str) -> list[Any]:
    found = families.get(family)
    return [
        s
        for s in (found.samples if found is not None else ())
        if s.name.endswith(suffix) and "/chat/completions" in s.labels.get("http_route", "/chat/completions")
    ]


def by_status(families: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sample in chat_samples(families, "perfkit_requests", "_total"):
        status = sample.labels["http_response_status_code"]
        counts[status] = counts.get(status, 0) + int(sample.value)
    return counts


def auth_count(families: dict[str, Any]) -> float:
    return sum(
        s.value
        for s in chat_samples(families, "perfkit_stage_duration_seconds", "_count")
        if s.labels["stage"] == "auth"
    )


def _bucket_since(
    families: dict[str, Any], before: dict[str, Any], histogram: str, label: tuple[str, str], q: float
) -> tuple[float, float]:
    """The (low, high] bound in seconds of the chat route's ``histogram`` bucket, of the series whose
    ``label`` has its value, that holds quantile q since ``before`` (a page read earlier)."""
    name, value = label
    cumulative: dict[float, float] = {}
    for page, sign in ((families, 1), (before, -1)):
        for s in chat_samples(page, histogram, "_bucket"):
            if s.labels[name] == value:
                bound = float(s.labels["le"])
                cumulative[bound] = cumulative.get(bound, 0) + sign * s.value
    bounds = sorted(cumulative)
    rank = q * cumulative[bounds[-1]]
    at = next(i for i, b in enumerate(bounds) if cumulative[b] >= rank)
    return (bounds[at - 1] if at else 0.0), bounds[at]


def bucket_bounds_ns(value_ns: float) -> tuple[int, int]:
    """The (low, high] bounds in ns of the histogram bucket (``BOUNDARIES_NS``, every histogram's) holding a value."""
    bucket = bisect_left(BOUNDARIES_NS, value_ns)
    return (BOUNDARIES_NS[bucket - 1] if bucket else 0), BOUNDARIES_NS[bucket]  # the first bucket's low is 0


def bucket_of(families: dict[str, Any], before: dict[str, Any], q: float) -> tuple[float, float]:
    """The (low, high] bound in ns of the duration bucket holding quantile q of the chat route's 200s
    since ``before`` (a page read earlier)."""
    low, high = _bucket_since(
        families, before, "perfkit_request_duration_seconds", ("http_response_status_code", "200"), q
    )
    return low * 1e9, high * 1e9


def servers_and_auth(spans: Path) -> tuple[dict[str, int], dict[str, tuple[int, float, int]]]:
    """SERVER spans per trace id, and (start ns, auth ms, adjusted count) per trace id of each recorded
    request with auth."""
    servers: dict[str, int] = {}
    weight: dict[str, tuple[int, int]] = {}
    auth: dict[str, float] = {}
    for span in map(orjson.loads, spans.read_bytes().splitlines()):
        attributes = {a["key"]: a["value"] for a in span["attributes"]}
        trace = span["traceId"]
        if span["kind"] == 2:
            servers[trace] = servers.get(trace, 0) + 1
            weight[trace] = (int(span["startTimeUnixNano"]), int(attributes["perfkit.adjusted_count"]["intValue"]))
        elif span["name"] == "auth":
            auth[trace] = auth.get(trace, 0.0) + attributes["perfkit.stage.duration_ms"]["doubleValue"]
    return servers, {t: (weight[t][0], ms, weight[t][1]) for t, ms in auth.items() if t in weight}


def secret_requests(url: str, until: float, answers: list[tuple[int, str | None, str, float]]) -> None:
    """SECRET a second, each with the secret and a control header, to the model that reports what LiteLLM got."""
    headers = {"authorization": f"Bearer {KEY}", "x-perfkit-secret": HEADER_SECRET, "x-control-header": "1"}
    body = {"model": "headers", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < until:
            started = time.monotonic()
            r = client.post(f"{url}/v1/chat/completions", headers=headers, json=body)
            content = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text[:300]
            answers.append((r.status_code, r.headers.get("server-timing"), content, time.monotonic() - started))
            time.sleep(max(0.0, 1 / SECRET - (time.monotonic() - started)))


@dataclass
class Run:
    sent: dict[str, int]  # every request to the default proxy by status: the driver's, the secret's, the warm-up's
    main: dict[str, list[dict[str, Any]]]  # the driver's lines, by kind
    answers: list[tuple[int, str | None, str, float]]  # the secret's: status, Server-Timing, what LiteLLM got, s
    before: dict[str, Any]  # the proxy's /metrics after the warm-up
    families: dict[str, Any]  # the proxy's /metrics once every request was counted
    promql_rate: float
    promql: dict[float, float]  # quantile: ns
    spans: Path
    started_ns: int  # wall clock when the main run's load began
    everything: Pages  # the --record-rate all proxy's, same load at the same moments
    everything_spans: Path
    everything_traced: list[str]  # the trace ids of that proxy's requests with a sampled traceparent


@dataclass
class Pages:
    before: dict[str, Any]
    families: dict[str, Any]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One run of the proxy at a record rate of CAP a second per worker, for every test here; beside it a
    proxy recording every request, sent the same load at the same moments (its own drivers)."""
    tmp_path = tmp_path_factory.mktemp("weighted")
    port, spans = free_port(), tmp_path / "spans.jsonl"
    all_port, all_spans, all_out = free_port(), tmp_path / "all-spans.jsonl", tmp_path / "all"
    all_out.mkdir()
    with contextlib.ExitStack() as stack:
        monkeypatch = stack.enter_context(pytest.MonkeyPatch.context())
        monkeypatch.delenv("PERFKIT_RECORD_RATE")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "500")
        monkeypatch.setenv("PERFKIT_HEADER_SECRET", HEADER_SECRET)
        upstream = stack.enter_context(
            mock_process("--ttft-ms", "5", "--chunks", "3", "--error-500-fraction", "0.03", "--seed", "31")
        )
        url = stack.enter_context(proxy(upstream, tmp_path / "default", spans, f"{CAP:g}", port))
        all_url = stack.enter_context(proxy(upstream, tmp_path / "everything", all_spans, "all", all_port))
        prometheus = stack.enter_context(prometheus_process(tmp_path, "perfkit", [f"127.0.0.1:{port}"]))
        warm = [driver(u, 5, 4, out / "warm.jsonl") for u, out in ((url, tmp_path), (all_url, all_out))]
        for load in warm:  # LiteLLM's first requests in each worker are slow
            assert load.wait(timeout=120) == 0, load.communicate()[1][-2000:]
        deadline = time.monotonic() + 30
        while sum(by_status(before := scrape(port)).values()) < 20 and time.monotonic() < deadline:
            time.sleep(0.5)
        while sum(by_status(all_before := scrape(all_port)).values()) < 20 and time.monotonic() < deadline:
            time.sleep(0.5)
        # The main run: all kinds of request at once, the same to each proxy.
        started_ns = time.time_ns()
        answers: list[tuple[int, str | None, str, float]] = []
        all_answers: list[tuple[int, str | None, str, float]] = []
        until = time.monotonic() + SECONDS
        secrets = [
            threading.Thread(target=secret_requests, args=(u, until, a))
            for u, a in ((url, answers), (all_url, all_answers))
        ]
        for thread in secrets:
            thread.start()
        runs: dict[tuple[str, str], Any] = {}
        first_started = time.time()
        for u, out in ((url, tmp_path), (all_url, all_out)):
            runs[(u, "good")] = driver(u, GOOD, SECONDS, out / "good.jsonl")
            runs[(u, "refused")] = driver(u, REFUSED, SECONDS, out / "refused.jsonl", key="sk-not-the-key")
            runs[(u, "traced")] = driver(u, TRACED, SECONDS, out / "traced.jsonl", traceparent="sampled")
        for (_, name), load in runs.items():
            _, stderr = load.communicate(timeout=SECONDS + 120)
            assert load.returncode == (1 if name == "refused" else 0), (name, stderr[-2000:])  # each refusal fails
        for thread in secrets:
            thread.join()
        time.sleep(2)  # a scrape after the last request
        # The window ends while every driver still sends (each runs SECONDS from its own start, after
        # its interpreter's) and begins SECONDS - WINDOW_S - 2 s after the first was launched: six
        # interpreters starting at once on a busy machine are seconds apart.
        at = first_started + SECONDS - 2

        def rate(window_s: int, ending: float) -> float:
            return prometheus.value(f"sum(rate(perfkit_requests_total{{{CHAT}}}[{window_s}s]))", ending)

        promql_rate = rate(WINDOW_S, at)
        by_ten = [rate(10, first_started + end) for end in range(10, SECONDS + 1, 10)]  # how soon all were sending
        promql = {
            q: prometheus.value(
                f"histogram_quantile({q}, sum by (le) (rate(perfkit_request_duration_seconds_bucket"
                f'{{{CHAT},http_response_status_code="200"}}[{WINDOW_S}s])))',
                at,
            )
            * 1e9
            for q in (0.5, 0.95)
        }
        main = {name: lines_of(tmp_path / f"{name}.jsonl") for name in ("warm", "good", "refused", "traced")}
        sent = sent_by_status(main, answers)
        all_main = {name: lines_of(all_out / f"{name}.jsonl") for name in ("warm", "good", "refused", "traced")}
        all_sent = sent_by_status(all_main, all_answers)
        deadline = time.monotonic() + 30
        for p, expected in ((port, sent), (all_port, all_sent)):
            while sum(by_status(scrape(p)).values()) < sum(expected.values()) and time.monotonic() < deadline:
                time.sleep(0.5)
        time.sleep(1.5)  # every worker's last snapshot
        families, all_families = scrape(port), scrape(all_port)
        wait_for_spans(port, spans)
        wait_for_spans(all_port, all_spans)
    print(
        f"sent {sent}; auth's weighted count {auth_count(families)}; PromQL {promql_rate:.2f}/s, {promql}; "
        f"each 10 s {[round(rate, 2) for rate in by_ten]}/s"
    )
    everything = Pages(all_before, all_families)
    all_traced = [line["trace_id"] for line in all_main["traced"]]
    yield Run(
        sent, main, answers, before, families, promql_rate, promql, spans, started_ns, everything, all_spans, all_traced
    )


def sent_by_status(
    lines: dict[str, list[dict[str, Any]]], answers: list[tuple[int, str | None, str, float]]
) -> dict[str, int]:
    sent: dict[str, int] = {}
    for status in [line["status"] for kind in lines.values() for line in kind] + [a[0] for a in answers]:
        sent[str(status)] = sent.get(str(status), 0) + 1
    return sent


def test_every_request_is_counted_by_status_exactly(run: Run) -> None:
    assert by_status(run.families) == run.sent
    assert any(s in run.sent for s in ("400", "401")) and any(s.startswith("5") for s in run.sent), run.sent
    sent = sum(len(lines) for name, lines in run.main.items() if name != "warm") + len(run.answers)
    assert sent / SECONDS >= 3 * WORKERS * CAP, sent  # past three times the workers' combined cap


def test_the_auth_stages_weighted_count_is_the_requests_that_reached_auth(run: Run) -> None:
    reached_auth = sum(run.sent.values())  # every request (a refused one fails in auth)
    weighted = auth_count(run.families)
    recorded = servers_and_auth(run.spans)[1]
    assert len(recorded) < reached_auth / 2  # a sample: the cap held
    assert abs(weighted - reached_auth) <= 0.05 * reached_auth, (weighted, reached_auth, len(recorded))


def rank_band(q: float, n: float) -> tuple[float, float]:
    """The ranks, as fractions, that the q-quantile of n requests drawn from a larger set may stand at
    in that set: q plus or minus Z standard errors, sqrt(q(1-q)/n) (docs/telemetry.md#the-weighted-sample)."""
    half = Z * rank_standard_error(q, n)
    return max(0.0, q - half), min(1.0, q + half)


def test_the_request_durations_p50_and_p95_and_rate_are_the_drivers(run: Run) -> None:
    """perfkit's bucket holds the driver's quantile (a few ms of client and socket time aside), on
    /metrics over the whole run. It cannot if the proxy fell behind: its requests then wait before
    the middleware has them (docs/telemetry.md). PromQL reads a 30 s window: the requests in it are a
    part of the run's, whose quantile stands within ``rank_band`` of the run's, so its bucket must
    meet the driver's latencies between those ranks."""
    lines = run.main["good"] + run.main["traced"]
    latencies = [(line["end_ms"] - line["sent_ms"]) * 1e6 for line in lines if line["status"] == 200]
    assert len(latencies) >= 0.9 * len(lines), "the proxy did not keep up: requests failed or timed out"
    latencies = sorted(latencies + [seconds * 1e9 for status, _, _, seconds in run.answers if status == 200])
    in_window = len(latencies) * WINDOW_S / SECONDS
    for q in (0.5, 0.95):
        driver_q = latencies[int(q * len(latencies))]
        low, high = bucket_of(run.families, run.before, q)
        assert low - _SLACK_NS <= driver_q <= high + _SLACK_NS, ("metrics", q, driver_q / 1e6, low / 1e6, high / 1e6)
        low, high = bucket_bounds_ns(run.promql[q])
        ranks = rank_band(q, in_window)
        band = [latencies[min(len(latencies) - 1, int(r * len(latencies)))] for r in ranks]
        assert band[0] - _SLACK_NS <= high and low <= band[1] + _SLACK_NS, (
            "promql",
            q,
            ranks,
            [b / 1e6 for b in band],
            run.promql[q] / 1e6,
            low / 1e6,
            high / 1e6,
        )
    driver_rate = (sum(len(lines) for name, lines in run.main.items() if name != "warm") + len(run.answers)) / SECONDS
    served = f"the proxy served {run.promql_rate:.1f}/s of {driver_rate:.1f}/s (driver p50 {latencies[len(latencies) // 2] / 1e9:.2f} s)"
    # Each worker's snapshot lags its traffic by up to SNAPSHOT_INTERVAL_S, at either end of the window.
    assert abs(run.promql_rate - driver_rate) <= SNAPSHOT_INTERVAL_S / WINDOW_S * driver_rate, served


def test_past_the_cap_a_sampled_parent_has_its_spans_and_the_secret_its_server_timing_never_the_app(
    run: Run,
) -> None:
    servers = servers_and_auth(run.spans)[0]
    traced = [line["trace_id"] for line in run.main["traced"]]
    assert traced and all(servers.get(t) == 1 for t in traced), [t for t in traced if servers.get(t) != 1]
    assert run.answers and all(status == 200 and timing for status, timing, *_ in run.answers), run.answers[:3]
    for _, _, content, _ in run.answers:
        received = orjson.loads(content)  # the header names LiteLLM handed the custom provider
        assert "x-control-header" in received and "x-perfkit-secret" not in received, received


def auth_bucket_of_histogram(families: dict[str, Any], before: dict[str, Any], q: float) -> float:
    """The upper bound, ms, of the weighted auth-stage bucket that holds quantile q since ``before``."""
    return _bucket_since(families, before, "perfkit_stage_duration_seconds", ("stage", "auth"), q)[1] * 1e3


def between_the_proxies(run: Run) -> float:
    """How much slower auth ran in the record-all proxy than in the other, on the requests both record
    whatever the rate: those with a sampled traceparent, the same at the same moments. Their means, as
    auth's time has two modes (docs/telemetry.md) and a median of 75 may jump from one to the other."""
    traced = [line["trace_id"] for line in run.main["traced"]]
    means = []
    for spans, ids in ((run.everything_spans, run.everything_traced), (run.spans, traced)):
        auth = servers_and_auth(spans)[1]
        means.append(statistics.fmean(auth[t][1] for t in ids if t in auth))
    return means[0] / means[1]


def test_auths_p50_from_the_weighted_sample_is_a_record_all_runs(run: Run) -> None:
    """The record-all proxy's p50 of auth over every request stands within the weighted sample's
    ``rank_band`` of its p50 (over the spans, each its adjusted count times, as docs/telemetry.md says
    to read them), n being the sample's effective size, widened by the 10% two proxies may differ, or
    by as much as they differed in this run on the requests both recorded; and the record-all
    histogram's p50 bucket (what histogram_quantile reads) lies among the weighted stage histogram's
    buckets at those ranks, or the buckets of those widened values."""
    recorded = [
        (ms, weight) for start, ms, weight in servers_and_auth(run.spans)[1].values() if start >= run.started_ns
    ]
    everything = sorted(
        ms for start, ms, _ in servers_and_auth(run.everything_spans)[1].values() if start >= run.started_ns
    )
    exact = everything[len(everything) // 2]
    effective = effective_size(recorded)
    ranks = rank_band(0.5, effective)
    sample = [weighted_quantile(recorded, q) for q in (ranks[0], 0.5, ranks[1])]
    sampled_buckets = [auth_bucket_of_histogram(run.families, run.before, q) for q in ranks]
    bucket = auth_bucket_of_histogram(run.everything.families, run.everything.before, 0.5)
    slower = between_the_proxies(run)
    lowest, highest = sample[0] / max(BETWEEN_PROXIES, 1 / slower), sample[2] * max(BETWEEN_PROXIES, slower)
    print(
        f"auth p50: weighted sample {sample[1]:.2f} ms, {sample[0]:.2f}-{sample[2]:.2f} ms at ranks "
        f"{ranks[0]:.2f}-{ranks[1]:.2f} ({len(recorded)} spans, effective size {effective:.0f}); every request "
        f"{exact:.2f} ms ({len(everything)}); histogram buckets to {sampled_buckets} and {bucket} ms; the "
        f"record-all proxy's auth {slower:.3f}x the other's on the traced requests"
    )
    assert lowest <= exact <= highest, (sample, exact, effective, slower)
    low, high = (bucket_bounds_ns(ms * 1e6)[1] / 1e6 for ms in (lowest, highest))
    assert min(low, sampled_buckets[0]) <= bucket <= max(high, sampled_buckets[1]), (sampled_buckets, bucket)
