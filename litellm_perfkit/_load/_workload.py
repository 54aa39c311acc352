"""What each request of a run looks like: endpoint, body, headers, trace context."""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

__all__ = ["Workload", "WorkloadError", "endpoint_url", "seed_prompt", "SEED_SENTENCE"]

# The sentence of LiteLLM's own load tests, repeated with a uuid to avoid cache hits.
SEED_SENTENCE = " This is a test there will be no cache hits and we'll fill up the context"


def seed_prompt(repeats: int) -> str:
    """LiteLLM's load-test prompt: a fresh uuid and the sentence, ``repeats`` times."""
    return f"{uuid.uuid4()}{SEED_SENTENCE}" * repeats


class WorkloadError(ValueError):
    pass


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
    if not path.endswith(("/completions", "/embeddings", "/responses")):
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
    send_traceparent: bool = True
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

    def _head(self) -> bytes:
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Content-Type: application/json",
                 "Accept: application/json, text/event-stream", "User-Agent: perfkit-load"]  # fmt: skip
        if self.api_key:
            lines.append(f"Authorization: Bearer {self.api_key}")
        lines += [f"{k}: {v}" for k, v in self.headers]
        return "\r\n".join(lines).encode("latin-1")

    def build(self, rng: random.Random) -> tuple[bytes, str, str]:
        """(raw request bytes, trace id, model) for one request."""
        model = self._pick_model(rng)
        if self.body_template is not None:
            body_obj = dict(self.body_template)
            body_obj.setdefault("model", model)
            model = str(body_obj["model"])
        elif self.path.endswith("/embeddings"):
            body_obj = {"model": model, "input": seed_prompt(self.prompt_repeats)}
        elif self.path.endswith("/chat/completions"):
            body_obj = {"model": model, "messages": [{"role": "user", "content": seed_prompt(self.prompt_repeats)}]}
        else:
            body_obj = {"model": model, "prompt": seed_prompt(self.prompt_repeats)}
        if self.stream:
            body_obj["stream"] = True
            body_obj.setdefault("stream_options", {"include_usage": True})
        if self.max_tokens is not None:
            body_obj["max_tokens"] = self.max_tokens
        body = orjson.dumps(body_obj)
        trace_id = os.urandom(16).hex()
        head = self._head()
        if self.send_traceparent:
            head += f"\r\ntraceparent: 00-{trace_id}-{os.urandom(8).hex()}-01".encode()
        return head + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body, trace_id, model

    def _pick_model(self, rng: random.Random) -> str:
        if len(self.models) == 1:
            return self.models[0][0]
        names, weights = zip(*self.models)
        return str(rng.choices(names, weights)[0])
