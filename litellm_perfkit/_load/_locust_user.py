"""A Locust ``FastHttpUser`` for model APIs (chat, completions, embeddings, Messages, Responses).

Each request is one Locust entry, so Locust's own table and its Aggregated
row count HTTP requests. With ``--perfkit-entries`` it also reports, as
entries of their own: ``TTFT`` (streaming), ``CHUNK_GAP`` (every gap between
output events), ``OVERHEAD`` (each overhead header a gateway sent) and
``STAGE`` (each ``Server-Timing`` stage). Those rows add to Locust's
Aggregated row, which is why they are opt-in. Every request also goes into
perfkit's exact histograms (``_locust_merge``), which Locust workers ship to
the master; its table (TTFT, overheads, stages included) ends the run.

Importing this module imports Locust, which monkey-patches the standard
library with gevent: import it from a locustfile, never from a gateway.
"""

from __future__ import annotations

import os
import time
from time import perf_counter_ns
from typing import Any

import orjson
from geventhttpclient.response import HTTPParseError
from locust import FastHttpUser, constant, events, task

from .._wire._environment_variables import API_KEY
from .._wire._headers import parse_server_timing
from .._wire._names import CAPTURED_HEADERS, OVERHEAD_HEADERS, SERVER_TIMING_HEADER
from ._exchange import Exchange, ResponseReader
from ._locust_merge import STATE, add_options, extra_entries
from ._workload import api_of, request_body, request_headers, seed_prompt

__all__ = ["ChatCompletionsUser"]

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
    def chat_completion(
        self, model: str | None = None, stream: bool | None = None, name: str | None = None, path: str | None = None
    ) -> Exchange:
        """Send one request, report it to Locust and perfkit; returns what was measured.
        Each argument left out comes from the ``--perfkit-*`` options."""
        options = self.environment.parsed_options
        model = str(model or getattr(options, "perfkit_model", "fake-openai-endpoint"))
        if stream is None:
            stream = getattr(options, "perfkit_stream", "on") == "on"
        path = str(path or getattr(options, "perfkit_path", "/v1/chat/completions"))
        label = name or f"{path} ({'stream' if stream else 'json'})"
        prompt = seed_prompt(getattr(options, "perfkit_prompt_repeats", 150))
        body = request_body(
            api_of(path) or "chat", model, prompt, stream, getattr(options, "perfkit_max_tokens", 0) or None
        )
        trace_id = os.urandom(16).hex()
        api_key = getattr(options, "perfkit_api_key", None) or os.environ.get(API_KEY, "sk-1234")
        exchange = Exchange(intended_ns=perf_counter_ns(), trace_id=trace_id, model=model)
        exchange.sent_ns = exchange.intended_ns
        started_wall = time.time()
        payload: Any = orjson.dumps(body)  # bytes work; Locust's annotation says str or dict
        with self.client.post(
            path, data=payload, headers=request_headers(api_key, trace_id), name=label, stream=True, catch_response=True
        ) as response:
            exchange.headers_ns = exchange.first_byte_ns = perf_counter_ns()
            self._read(response, exchange)
            # Locust's own entry: the whole response, not just its headers.
            response.request_meta["response_time"] = (exchange.end_ns - exchange.sent_ns) / 1e6
            if exchange.error is not None:
                response.failure(f"{exchange.error}: {exchange.detail[:200]}")
            else:
                response.success()
        self._report(exchange, label)
        STATE.record(exchange, stream, started_wall)
        return exchange

    @staticmethod
    def _read(response: Any, exchange: Exchange) -> None:
        exchange.status = response.status_code
        raw_headers = response.headers or {}
        exchange.headers = {k: str(raw_headers.get(k)) for k in CAPTURED_HEADERS if raw_headers.get(k) is not None}
        if response.status_code == 0 or (response.status_code < 400 and getattr(response, "error", None) is not None):
            error = getattr(response, "error", None)
            refused = isinstance(error, ConnectionRefusedError)
            exchange.fail("connection_refused" if refused else "connect_error", repr(error))
            exchange.end_ns = perf_counter_ns()
            return
        reader = ResponseReader(exchange)
        try:
            raw = response._response
            while True:  # line by line: read(n) would wait for n bytes
                line = raw.readline(b"\n")
                if not line:
                    break
                reader.feed(line, perf_counter_ns())
            rest = raw.read()  # a last line without its newline, which readline leaves behind
            if rest:
                reader.feed(rest, perf_counter_ns())
        except (OSError, HTTPParseError) as exc:  # the connection closed before the body's end
            exchange.fail("disconnect", repr(exc))
        reader.finish(perf_counter_ns())

    # -- Locust entries -------------------------------------------------------
    def _report(self, exchange: Exchange, label: str) -> None:
        kinds = extra_entries(self.environment.parsed_options)
        if exchange.error is not None or not kinds:
            return
        fire = self.environment.events.request.fire
        context = self.context()

        def entry(kind: str, name: str, ms: float) -> None:
            fire(request_type=kind, name=name, response_time=ms, response_length=0, exception=None, context=context)

        if "ttft" in kinds and exchange.token_times:
            entry("TTFT", label, (exchange.first_token_ns - exchange.sent_ns) / 1e6)
        if "chunk_gap" in kinds:
            times = exchange.token_times
            for before, after in zip(times, times[1:]):
                entry("CHUNK_GAP", label, (after - before) / 1e6)
        if "overhead" in kinds:
            for header in OVERHEAD_HEADERS:
                value = exchange.headers.get(header)
                if value is not None:
                    try:
                        entry("OVERHEAD", header, float(value))
                    except ValueError:
                        pass
        timing = exchange.headers.get(SERVER_TIMING_HEADER)
        if "stage" in kinds and timing:
            for stage, ms in parse_server_timing(timing).items():
                entry("STAGE", stage, ms)
