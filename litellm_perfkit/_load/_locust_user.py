"""A Locust ``FastHttpUser`` for OpenAI-compatible chat completions.

Besides Locust's own entry for each request, it reports as Locust entries:
``TTFT`` (streaming), ``CHUNK_GAP`` (every gap between content chunks),
``OVERHEAD`` (each overhead header a gateway sent) and ``STAGE`` (each
``Server-Timing`` stage). It also records every request into perfkit's exact
histograms (``_locust_merge``), which Locust workers ship to the master.

Importing this module imports Locust, which monkey-patches the standard
library with gevent: import it from a locustfile, never from a gateway.
"""

from __future__ import annotations

import os
import time
from time import perf_counter_ns
from typing import Any

import orjson
from locust import FastHttpUser, constant, events, task

from .._core._headers import parse_server_timing
from .._core._sse import has_content_delta
from ._http import CAPTURED_HEADERS, Exchange, completion_tokens, http_error
from ._locust_merge import STATE, add_options
from ._workload import seed_prompt

__all__ = ["ChatCompletionsUser"]

OVERHEAD_HEADERS = ("x-litellm-overhead-duration-ms", "x-perfkit-overhead-ms")

events.init_command_line_parser.add_listener(add_options)


class ChatCompletionsUser(FastHttpUser):
    """Sends chat completions back to back (closed loop); settings come from
    the ``--perfkit-*`` options (or ``PERFKIT_*`` variables, or locust.conf)."""

    abstract = True
    wait_time = constant(0)

    @task
    def _chat_task(self) -> None:
        # Locust keeps the decorated function object itself, so a subclass's
        # override of a @task method would be ignored: dispatch by name instead.
        self.chat()

    def chat(self) -> None:
        """The task: one request. Override it (``self.chat_completion(model=...)``)."""
        self.chat_completion()

    # -- one request ----------------------------------------------------------
    def chat_completion(self, model: str | None = None, stream: bool | None = None, name: str | None = None) -> Exchange:
        """Send one request, report it to Locust and perfkit; returns what was measured."""
        options = self.environment.parsed_options
        model = str(model or getattr(options, "perfkit_model", "fake-openai-endpoint"))
        if stream is None:
            stream = getattr(options, "perfkit_stream", "on") == "on"
        path = getattr(options, "perfkit_path", "/v1/chat/completions")
        label = name or f"{path} ({'stream' if stream else 'json'})"
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": seed_prompt(getattr(options, "perfkit_prompt_repeats", 150))}],
        }
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if getattr(options, "perfkit_max_tokens", 0):
            body["max_tokens"] = options.perfkit_max_tokens
        trace_id = os.urandom(16).hex()
        headers = {"traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01", "Accept": "application/json, text/event-stream"}
        api_key = getattr(options, "perfkit_api_key", None) or os.environ.get("API_KEY", "sk-1234")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        exchange = Exchange(intended_ns=perf_counter_ns(), trace_id=trace_id, model=model)
        exchange.sent_ns = exchange.intended_ns
        started_wall = time.time()
        payload: Any = orjson.dumps(body)  # bytes work; Locust's annotation says str or dict
        with self.client.post(path, data=payload, headers={**headers, "Content-Type": "application/json"},
                              name=label, stream=True, catch_response=True) as response:  # fmt: skip
            exchange.headers_ns = exchange.first_byte_ns = perf_counter_ns()
            self._read(response, exchange, stream)
            exchange.end_ns = exchange.end_ns or perf_counter_ns()
            # Locust's own entry: the whole response, not just its headers.
            response.request_meta["response_time"] = (exchange.end_ns - exchange.sent_ns) / 1e6
            if exchange.error is not None:
                response.failure(f"{exchange.error}: {exchange.detail[:200]}")
            else:
                response.success()
        self._report(exchange, label, stream)
        STATE.record(exchange, stream, started_wall)
        return exchange

    def _read(self, response: Any, exchange: Exchange, stream: bool) -> None:
        exchange.status = response.status_code
        raw_headers = response.headers or {}
        exchange.headers = {k: str(raw_headers.get(k)) for k in CAPTURED_HEADERS if raw_headers.get(k) is not None}
        if response.status_code >= 400:  # such a response also carries an .error: the status says more
            exchange.error, exchange.detail = http_error(response.status_code), (response.text or "")[:200]
            return
        if response.status_code == 0 or getattr(response, "error", None) is not None:
            error = getattr(response, "error", None)
            refused = isinstance(error, ConnectionRefusedError)
            exchange.error, exchange.detail = ("connection_refused" if refused else "connect_error"), repr(error)
            return
        try:
            if stream:
                self._read_stream(response._response, exchange)  # line by line: read(n) waits for n bytes
            else:
                self._read_json(response.content or b"", exchange)
        except (OSError, ConnectionError) as exc:
            exchange.error, exchange.detail = "disconnect", repr(exc)

    @staticmethod
    def _read_json(content: bytes, exchange: Exchange) -> None:
        exchange.end_ns = perf_counter_ns()
        try:
            document = orjson.loads(content)
        except orjson.JSONDecodeError:
            exchange.error, exchange.detail = "protocol_error", "response body is not JSON"
            return
        tokens = completion_tokens(document)
        if tokens is not None:
            exchange.usage_tokens = tokens

    @staticmethod
    def _read_stream(raw: Any, exchange: Exchange) -> None:
        done = False
        while True:
            line = raw.readline(b"\n")
            now = perf_counter_ns()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                continue
            try:
                event = orjson.loads(data)
            except orjson.JSONDecodeError:
                exchange.error, exchange.detail = "malformed_sse", data[:200].decode("utf-8", "replace")
                return
            exchange.events += 1
            if has_content_delta(event):
                exchange.token_times.append(now)
                exchange.first_token_ns = exchange.first_token_ns or now
            tokens = completion_tokens(event)
            if tokens is not None:
                exchange.usage_tokens = tokens
        exchange.end_ns = perf_counter_ns()
        if not done:
            exchange.error, exchange.detail = "disconnect", "the stream ended without data: [DONE]"

    # -- Locust entries -------------------------------------------------------
    def _report(self, exchange: Exchange, label: str, stream: bool) -> None:
        if exchange.error is not None:
            return
        fire = self.environment.events.request.fire
        context = self.context()

        def entry(kind: str, name: str, ms: float) -> None:
            fire(request_type=kind, name=name, response_time=ms, response_length=0, exception=None, context=context)

        if stream and exchange.first_token_ns:
            entry("TTFT", label, (exchange.first_token_ns - exchange.sent_ns) / 1e6)
            times = exchange.token_times
            for before, after in zip(times, times[1:]):
                entry("CHUNK_GAP", label, (after - before) / 1e6)
        for header in OVERHEAD_HEADERS:
            value = exchange.headers.get(header)
            if value is not None:
                try:
                    entry("OVERHEAD", header, float(value))
                except ValueError:
                    pass
        timing = exchange.headers.get("server-timing")
        if timing:
            for stage, ms in parse_server_timing(timing).items():
                entry("STAGE", stage, ms)
