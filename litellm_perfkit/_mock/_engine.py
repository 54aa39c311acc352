"""The mock provider's logic, independent of any server: request in, plan out.

A plan says what to send and when, as offsets from the moment the request
was fully received. Bodies are rendered at send time, so each one carries the
mock's own send timestamp (ground truth) in a field OpenAI clients ignore:

    "perfkit": {"seq": <chunk number>, "mono_ns": <perf_counter_ns at send>, "unix_ns": <time_ns at send>}
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import orjson

from .._wire._names import EVENT_STREAM_CONTENT_TYPE, JSON_CONTENT_TYPE
from ._config import Deployment, MockConfig, ModelProfile
from ._formats import FORMATS, ID_MARKER, Answer, Api, open_json

__all__ = ["MockEngine", "Plan", "Quota", "error_body", "route"]

Action = Literal["respond", "hang", "disconnect", "malformed"]
Render = Callable[[int], bytes]  # seq -> bytes, called at send time
JSON = JSON_CONTENT_TYPE.encode()
SSE = EVENT_STREAM_CONTENT_TYPE.encode()


def error_body(message: str, kind: str, code: str | None = None, param: str | None = None, api: Api = "chat") -> bytes:
    """The error JSON of the API: Anthropic's for Messages, OpenAI's for the rest."""
    if api == "messages":
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return orjson.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}})


def _stamped(prefix: bytes, seq: int, suffix: bytes = b"}") -> bytes:
    """``prefix`` is a JSON object without its closing brace; the stamp is
    added last, at send time. Cheaper than building and dumping a dict."""
    return b'%b,"perfkit":{"seq":%d,"mono_ns":%d,"unix_ns":%d}%b' % (
        prefix,
        seq,
        time.perf_counter_ns(),
        time.time_ns(),
        suffix,
    )


MALFORMED_EVENT = b'data: {"perfkit":"malformed event, its JSON cut\n\n'


def _malformed(plan: Plan) -> Render:
    """``plan``'s render with one event replaced by cut JSON (the rest of the
    stream as it was), or, for a JSON answer, the body cut in half: a same
    answer each time, so that what a client does with it can be compared."""
    render, at = plan.render, plan.disconnect_after
    assert render is not None
    if not plan.streaming:

        def cut(seq: int) -> bytes:
            body = render(seq)
            return body[: len(body) // 2]

        return cut
    return lambda seq: MALFORMED_EVENT if seq == at else render(seq)


@dataclass
class Plan:
    status: int
    content_type: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    # Non-streaming: the body, rendered at ``at_s``. Streaming: the SSE events,
    # event i rendered and sent at ``offsets_s[i]``.
    render: Render | None = None
    at_s: float = 0.0
    offsets_s: list[float] | None = None
    action: Action = "respond"
    disconnect_after: int = 0  # streams: events sent before the connection is cut, or the malformed event
    hang_s: float = 0.0

    @property
    def streaming(self) -> bool:
        return self.offsets_s is not None


class Quota:
    """Requests and tokens per minute over a sliding 60 s window."""

    def __init__(self, rpm: int, tpm: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._clock = clock
        self._requests: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._token_total = 0

    def admit(self, tokens: int) -> float | None:
        """None if admitted, else seconds until it could be."""
        if not (self.rpm or self.tpm):
            return None
        now = self._clock()
        while self._requests and self._requests[0] <= now - 60:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - 60:
            self._token_total -= self._tokens.popleft()[1]
        if self.rpm and len(self._requests) >= self.rpm:
            return self._requests[0] + 60 - now
        if self.tpm and self._token_total + tokens > self.tpm:
            return (self._tokens[0][0] + 60 - now) if self._tokens else 60.0
        self._requests.append(now)
        self._tokens.append((now, tokens))
        self._token_total += tokens
        return None


def _text_chars(content: Any) -> int:
    """Characters of text in a message's content: a string, or a list of parts with "text"."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            len(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text", ""), str)
        )
    return 0


def _prompt_tokens(payload: dict[str, Any]) -> int:
    """About 4 characters a token, like the usual rule of thumb; at least 1.
    Messages (Chat, Anthropic), Anthropic's system, Responses' input, prompts."""
    chars = _text_chars(payload.get("system"))
    items = payload.get("input") if isinstance(payload.get("input"), list) else payload.get("messages")
    for message in items if isinstance(items, list) else ():
        if isinstance(message, dict):
            chars += _text_chars(message.get("content"))
    for key in ("prompt", "input"):
        value = payload.get(key)
        if isinstance(value, str):
            chars += len(value)
        elif key == "prompt" and isinstance(value, list):
            chars += sum(len(p) for p in value if isinstance(p, str))
    return max(1, math.ceil(chars / 4))


Endpoint = Literal["chat", "completions", "messages", "responses", "embeddings"]
# path after /v1, /openai/v1 or /openai/deployments/{name}
_ENDPOINTS: dict[str, Endpoint] = {
    "/chat/completions": "chat",
    "/completions": "completions",
    "/embeddings": "embeddings",
    "/messages": "messages",
    "/responses": "responses",
}
# the field each endpoint needs, and its type if it must have one
_REQUIRED: dict[Endpoint, tuple[str, type | None]] = {
    "chat": ("messages", list),
    "completions": ("prompt", None),
    "embeddings": ("input", None),
    "messages": ("messages", list),
    "responses": ("input", None),
}
_AZURE_DEPLOYMENTS = "/openai/deployments/"


def route(path: str, query: str) -> tuple[Endpoint, str | None] | str:
    """(endpoint, Azure deployment name or None) for a POST path, or why not.
    Azure's deployment paths need ``api-version``, as Azure's do."""
    if path.startswith(_AZURE_DEPLOYMENTS):
        deployment, _, rest = path[len(_AZURE_DEPLOYMENTS) :].partition("/")
        endpoint = _ENDPOINTS.get("/" + rest)
        if not deployment or endpoint not in ("chat", "completions", "embeddings"):
            return f"Unknown path {path}"
        if "api-version=" not in query:
            return f"{path} needs the api-version query parameter, as Azure OpenAI does"
        return endpoint, deployment
    for prefix in ("/openai/v1", "/v1", ""):
        if path.startswith(prefix) and path[len(prefix) :] in _ENDPOINTS:
            return _ENDPOINTS[path[len(prefix) :]], None
    return f"Unknown path {path}"


class _Request(NamedTuple):
    """A valid request to an endpoint that answers with a model's output."""

    endpoint: Endpoint
    api: Api
    payload: dict[str, Any]
    model: str


class MockEngine:
    """Plans responses for one deployment. Not thread-safe: one event loop."""

    def __init__(self, config: MockConfig, deployment: Deployment) -> None:
        self.config = config
        self.deployment = deployment
        self.quota = Quota(deployment.rpm, deployment.tpm)
        self.requests = 0
        self._shared_rng = random.Random(config.seed)
        self._templates: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}

    def _rng(self, profile: ModelProfile) -> random.Random | None:
        if not profile.needs_draws:
            return None
        if self.config.seed is None:
            return self._shared_rng
        # Per request, from the seed and the request's number: the same run
        # gives the same draws whatever the concurrency.
        return random.Random(self.config.seed * 1_000_003 + self.requests)

    def plan(self, method: str, target: str, body: bytes) -> Plan:
        """The plan for one request; ``target`` is the request line's path and query."""
        self.requests += 1
        request = self._read(method, target, body)
        if isinstance(request, Plan):
            return request
        endpoint, api, payload, model = request
        profile = self.config.profile(model)
        rng = self._rng(profile)
        if endpoint == "embeddings":
            inputs = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
            tokens = max(1, sum(len(str(i)) for i in inputs) // 4)
            completion_tokens = 0
        else:
            tokens = _prompt_tokens(payload)
            completion_tokens = profile.chunks * profile.tokens_per_chunk
        wait = self.quota.admit(tokens + completion_tokens)
        if wait is not None:
            plan = self._error(
                api,
                429,
                "Rate limit reached for this deployment (mock quota)",
                "rate_limit_error",
                "rate_limit_exceeded",
            )
            plan.headers.append((b"retry-after", str(max(1, math.ceil(wait))).encode()))
            return plan
        fault = self._fault(api, profile, rng)
        if fault is not None and fault.action not in ("disconnect", "malformed"):
            return fault
        if endpoint == "embeddings":
            plan = self._embeddings(payload, model, profile, tokens, rng)
        else:
            plan = self._completion(api, payload, model, profile, tokens, rng)
        if fault is not None:  # disconnect mid-stream or before the body; or one malformed event or body
            plan.action = fault.action
            plan.disconnect_after = (1 + rng.randrange(max(1, profile.chunks))) if plan.streaming and rng else 0
            if fault.action == "malformed":
                plan.render = _malformed(plan)
        return plan

    def _read(self, method: str, target: str, body: bytes) -> _Request | Plan:
        """The request to plan for, or the plan of its answer when it needs no model (health,
        the model list) or is not a valid request."""
        path, _, query = target.partition("?")
        if path in ("/health", "/health/liveliness", "/health/readiness") and method == "GET":
            return Plan(200, JSON, render=lambda _: b'{"status":"ok"}')
        if path in ("/v1/models", "/models") and method == "GET":
            return self._models()
        routed = route(path, query)
        if isinstance(routed, str):
            return self._error("chat", 404, routed, "invalid_request_error", "not_found")
        endpoint, deployment = routed
        api: Api = "chat" if endpoint == "embeddings" else endpoint
        if method != "POST":
            return self._error(api, 405, f"Use POST for {path}", "invalid_request_error", "method_not_allowed")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return self._error(api, 400, f"Request body is not valid JSON: {exc}", "invalid_request_error")
        if not isinstance(payload, dict):
            return self._error(api, 400, "Request body must be a JSON object", "invalid_request_error")
        model = payload.get("model") or deployment
        if not isinstance(model, str) or not model:
            return self._error(api, 400, "you must provide a model parameter", "invalid_request_error", param="model")
        field_name, field_type = _REQUIRED[endpoint]
        value = payload.get(field_name)
        if value is None or (field_type is not None and not isinstance(value, field_type)):
            return self._error(
                api,
                400,
                f"'{field_name}' is required" + (" (a list)" if field_type else ""),
                "invalid_request_error",
                param=field_name,
            )
        return _Request(endpoint, api, payload, model)

    # -- plans --------------------------------------------------------------
    def _error(
        self, api: Api, status: int, message: str, kind: str, code: str | None = None, param: str | None = None
    ) -> Plan:
        data = error_body(message, kind, code, param, api)
        return Plan(status, JSON, render=lambda _: data)

    def _models(self) -> Plan:
        names = sorted({"mock-model", *self.config.models})
        data = orjson.dumps(
            {
                "object": "list",
                "data": [{"id": n, "object": "model", "created": 0, "owned_by": "perfkit"} for n in names],
            }
        )
        return Plan(200, JSON, render=lambda _: data)

    def _fault(self, api: Api, profile: ModelProfile, rng: random.Random | None) -> Plan | None:
        if rng is None:
            return None
        draw = rng.random()
        edge = profile.error_500_fraction
        if draw < edge:
            return self._error(api, 500, "The mock provider failed (injected 500)", "server_error")
        edge += profile.error_429_fraction
        if draw < edge:
            plan = self._error(api, 429, "Rate limit reached (injected 429)", "rate_limit_error", "rate_limit_exceeded")
            plan.headers.append((b"retry-after", str(profile.retry_after_s).encode()))
            return plan
        edge += profile.timeout_fraction
        if draw < edge:
            return Plan(200, JSON, action="hang", hang_s=profile.hang_s)
        edge += profile.disconnect_fraction
        if draw < edge:
            return Plan(200, JSON, action="disconnect")
        edge += profile.malformed_fraction
        if draw < edge:
            return Plan(200, JSON, action="malformed")
        return None

    def _offsets(self, profile: ModelProfile, chunks: int, rng: random.Random | None) -> list[float]:
        """Send times (s) of the content chunks."""
        if rng is None:  # fixed timing: no draws needed
            ttft, itl = profile.ttft_ms / 1000, profile.itl_ms / 1000
            return [ttft + i * itl for i in range(chunks)]
        at = profile.draw(profile.ttft_ms, rng)
        offsets = [at]
        for _ in range(chunks - 1):
            at += profile.draw(profile.itl_ms, rng)
            offsets.append(at)
        return [ms / 1000 for ms in offsets]

    def _completion(
        self,
        api: Api,
        payload: dict[str, Any],
        model: str,
        profile: ModelProfile,
        prompt_tokens: int,
        rng: random.Random | None,
    ) -> Plan:
        chunks = profile.chunks
        finish: Literal["stop", "length"] = "stop"
        max_tokens = (
            payload.get("max_tokens") or payload.get("max_completion_tokens") or payload.get("max_output_tokens")
        )
        if isinstance(max_tokens, int) and max_tokens > 0 and max_tokens < chunks * profile.tokens_per_chunk:
            chunks = max(1, math.ceil(max_tokens / profile.tokens_per_chunk))
            finish = "length"
        piece = (profile.token_text + " ") * (profile.tokens_per_chunk - 1) + profile.token_text
        form = FORMATS[api]
        answer = Answer(
            ident=f"{form.id_prefix}{self.requests}",
            model=model,
            created=int(time.time()),
            first=piece,
            rest=" " + piece,
            chunks=chunks,
            finish=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=chunks * profile.tokens_per_chunk,
        )
        offsets = self._offsets(profile, chunks, rng)
        if not payload.get("stream"):
            prefix = self._body(api, answer, profile)
            return Plan(200, JSON, render=lambda seq: _stamped(prefix, seq), at_s=offsets[-1])
        events = form.stream(answer, offsets, payload)
        prefixes, terminal = events.prefixes, events.terminal
        times = events.times_s
        if terminal is not None:
            times.append(times[-1])
        last = len(prefixes)

        def render(seq: int) -> bytes:
            return terminal if seq == last and terminal is not None else _stamped(prefixes[seq], seq, b"}\n\n")

        return Plan(200, SSE, render=render, offsets_s=times)

    def _body(self, api: Api, answer: Answer, profile: ModelProfile) -> bytes:
        """The whole answer's open JSON. It is the same for the same model, size
        and second but for its id: serialized once, the id spliced in per request."""
        key = (api, answer.model, answer.chunks, answer.finish, answer.prompt_tokens, answer.created, id(profile))
        template = self._templates.get(key)
        if template is None:
            body = open_json(FORMATS[api].body(answer))
            before, _, after = body.partition(orjson.dumps(ID_MARKER)[1:-1])
            template = (before, after)
            if len(self._templates) > 256:
                self._templates.clear()
            self._templates[key] = template
        return template[0] + answer.ident.encode() + template[1]

    def _embeddings(
        self, payload: dict[str, Any], model: str, profile: ModelProfile, tokens: int, rng: random.Random | None
    ) -> Plan:
        inputs = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
        dims = int(payload.get("dimensions") or profile.embedding_dims)
        vector = [round(1 / math.sqrt(dims), 6)] * dims
        data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(len(inputs))]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}

        prefix = open_json({"object": "list", "data": data, "model": model, "usage": usage})
        return Plan(200, JSON, render=lambda seq: _stamped(prefix, seq), at_s=profile.draw(profile.ttft_ms, rng) / 1000)
