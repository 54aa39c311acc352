"""What each request of a run looks like: endpoint, body, headers, trace context."""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson

from .._wire._headers import format_traceparent
from .._wire._names import EVENT_STREAM_CONTENT_TYPE, JSON_CONTENT_TYPE, TRACEPARENT_HEADER
from ..types import TraceparentMode

__all__ = [
    "Api",
    "Workload",
    "WorkloadError",
    "api_of",
    "endpoint_url",
    "key_index",
    "request_body",
    "request_headers",
    "seed_prompt",
    "SEED_SENTENCE",
]

Api = Literal["chat", "completions", "embeddings", "messages", "responses"]
_APIS: tuple[tuple[str, Api], ...] = (
    ("/chat/completions", "chat"),
    ("/completions", "completions"),
    ("/embeddings", "embeddings"),
    ("/messages", "messages"),
    ("/responses", "responses"),
)
# Anthropic's Messages API requires max_tokens.
MESSAGES_MAX_TOKENS = 1024

# The sentence of LiteLLM's own load tests, repeated with a uuid to avoid cache hits.
SEED_SENTENCE = " This is a test there will be no cache hits and we'll fill up the context"


def seed_prompt(repeats: int) -> str:
    """LiteLLM's load-test prompt: a fresh uuid and the sentence, ``repeats`` times."""
    return f"{uuid.uuid4()}{SEED_SENTENCE}" * repeats


class WorkloadError(ValueError):
    pass


def api_of(path: str) -> Api | None:
    """Which model API a path serves, by its ending (``/v1`` prefix or not)."""
    for ending, api in _APIS:
        if path.endswith(ending):
            return api
    return None


def request_body(api: Api, model: str, prompt: str, stream: bool, max_tokens: int | None = None) -> dict[str, Any]:
    """The body of one request to ``api``: the same for both drivers."""
    body: dict[str, Any] = {"model": model}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    elif api == "messages":
        body["messages"] = [{"role": "user", "content": prompt}]
        body["max_tokens"] = max_tokens or MESSAGES_MAX_TOKENS
    elif api == "embeddings":
        body["input"] = prompt
    elif api == "responses":
        body["input"] = prompt
    else:
        body["prompt"] = prompt
    if stream and api != "embeddings":
        body["stream"] = True
        if api in ("chat", "completions"):
            body["stream_options"] = {"include_usage": True}
    if max_tokens is not None and api in ("chat", "completions"):
        body["max_tokens"] = max_tokens
    elif max_tokens is not None and api == "responses":
        body["max_output_tokens"] = max_tokens
    return body


def request_headers(api_key: str | None, trace_id: str, traceparent: TraceparentMode = "sampled") -> dict[str, str]:
    """Headers of one request (without Host and Content-Length): the same for both drivers."""
    headers = {"Content-Type": JSON_CONTENT_TYPE, "Accept": f"{JSON_CONTENT_TYPE}, {EVENT_STREAM_CONTENT_TYPE}"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if traceparent != "off":
        flags = 1 if traceparent == "sampled" else 0
        headers[TRACEPARENT_HEADER] = format_traceparent(trace_id, os.urandom(8).hex(), flags)
    return headers


def key_index(trace_id: str, keys: int) -> int:
    """Which of ``keys`` API keys a request with ``trace_id`` carries: a run
    with several keys interleaves them request by request, and whoever holds
    the trace ids (the driver's records) knows each request's key."""
    return int(trace_id[:8], 16) % keys


def endpoint_url(url: str) -> tuple[str, int, str, str]:
    """(host, port, path, display URL). A base URL gets ``/v1/chat/completions``."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise WorkloadError(f"{url!r} is not an http:// URL (https is not supported by the driver yet)")
    try:
        port = parts.port or 80
    except ValueError:
        raise WorkloadError(f"{url!r} has a bad port") from None
    path = parts.path.rstrip("/")
    if api_of(path) is None:
        path = (path or "/v1") + "/chat/completions"
    return parts.hostname, port, path, f"http://{parts.hostname}:{port}{path}"


@dataclass(frozen=True)
class Workload:
    url: str
    models: tuple[tuple[str, float], ...] = (("fake-openai-endpoint", 1.0),)
    stream: bool = False
    max_tokens: int | None = None
    prompt_repeats: int = 150
    body_template: dict[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    api_key: str | None = "sk-1234"
    # Several keys: each request carries one, chosen by its trace id (key_index); api_key is then unused.
    api_keys: tuple[str, ...] = ()
    # Other instances of the same server: new connections go to url's port and these in turn.
    instance_ports: tuple[int, ...] = ()
    traceparent: TraceparentMode = "sampled"
    host: str = field(init=False)
    port: int = field(init=False)
    path: str = field(init=False)

    def __post_init__(self) -> None:
        host, port, path, _ = endpoint_url(self.url)
        object.__setattr__(self, "host", host)
        object.__setattr__(self, "port", port)
        object.__setattr__(self, "path", path)
        if not self.models or any(w <= 0 for _, w in self.models):
            raise WorkloadError("model weights must be positive")

    def build(self, rng: random.Random) -> tuple[bytes, str, str]:
        """(raw request bytes, trace id, model) for one request."""
        model = self._pick_model(rng)
        api = api_of(self.path) or "chat"
        if self.body_template is not None:
            # The template's fields, with the run's streaming and length settings on top.
            body_obj = {"model": model, **self.body_template}
            settings = request_body(api, model, "", self.stream, self.max_tokens)
            for key in ("stream", "stream_options", "max_tokens", "max_output_tokens"):
                if key not in settings:
                    continue
                if key == "stream" or (self.max_tokens is not None and key != "stream_options"):
                    body_obj[key] = settings[key]
                else:
                    body_obj.setdefault(key, settings[key])
            model = str(body_obj["model"])
        else:
            body_obj = request_body(api, model, seed_prompt(self.prompt_repeats), self.stream, self.max_tokens)
        body = orjson.dumps(body_obj)
        trace_id = os.urandom(16).hex()
        headers = {
            **request_headers(self._key(trace_id), trace_id, self.traceparent),
            "User-Agent": "perfkit-load",
            **dict(self.headers),
        }
        lines = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            *(f"{k}: {v}" for k, v in headers.items()),
            f"Content-Length: {len(body)}",
        ]
        return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body, trace_id, model

    def _key(self, trace_id: str) -> str | None:
        return self.api_keys[key_index(trace_id, len(self.api_keys))] if self.api_keys else self.api_key

    def _pick_model(self, rng: random.Random) -> str:
        if len(self.models) == 1:
            return self.models[0][0]
        names, weights = zip(*self.models)
        return str(rng.choices(names, weights)[0])
