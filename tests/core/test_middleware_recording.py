"""Which requests the middleware records and what each stands for: the
record choice's weight, the requests recorded always (the secret's holders,
sampled parents), and the secret's header, never passed on (_core/_middleware.py,
_core/_sampling.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from litellm_perfkit import OVERHEAD_HEADER
from litellm_perfkit._core._backend import Backend
from litellm_perfkit._core._middleware import PerfkitMiddleware
from tests.support.asgi import http_scope, keeping, no_body
from tests.support.capture import capture_records

SECRET = (b"x-perfkit-secret", b"s3cret")
SAMPLED = (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
UNSAMPLED = (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")


class Served:
    """Requests sent straight through one middleware (no server): what the app saw, what the client got."""

    def __init__(self, backend: Backend, **options: Any) -> None:
        self.seen: list[list[tuple[bytes, bytes]]] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            self.seen.append(list(scope["headers"]))
            with backend.stage("auth"):  # a stage for Server-Timing to name (none outside a recorded request)
                pass
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

        self.middleware: PerfkitMiddleware = backend.middleware(app, **options)

    def clock_at(self, now_ns: list[int]) -> None:
        """The record choice reads ``now_ns[0]``, and every draw falls in: its pace alone decides."""
        choice = self.middleware._record_choice
        assert choice is not None
        choice._clock = lambda: now_ns[0]
        choice._draw = lambda: 0.0

    def get(self, *headers: tuple[bytes, bytes], client: str = "10.1.2.3") -> dict[bytes, bytes]:
        """One request; the response's headers."""
        sent, send = keeping()
        scope = http_scope("GET", "/", [(b"host", b"x"), *headers], (client, 5000))
        asyncio.run(self.middleware(scope, no_body, send))
        return dict(sent[0]["headers"])


@pytest.mark.parametrize("configured", [None, "s3cret"])
@pytest.mark.parametrize("ratio", [0.0, 1.0])
@pytest.mark.parametrize("carried", [b"s3cret", b"wrong"])
def test_the_secret_header_never_reaches_the_app(
    backend: Backend, configured: str | None, ratio: float, carried: bytes
) -> None:
    """Recorded or passed by, a secret configured or not, right or wrong: the app never sees the header."""
    served = Served(backend, header_secret=configured or "", record_ratio=ratio, record_rate="all")
    with capture_records():
        served.get((b"x-perfkit-secret", carried), (b"accept", b"*/*"), (b"x-perfkit-secret", b"again"))
    assert served.seen == [[(b"host", b"x"), (b"accept", b"*/*")]]


def test_the_secrets_holder_is_recorded_and_told_even_when_nothing_else_is(backend: Backend) -> None:
    served = Served(backend, header_secret="s3cret", record_ratio=0.0)
    with capture_records() as records:
        told = served.get(SECRET)
        untold = served.get()
        wrong = served.get((b"x-perfkit-secret", b"wrong"), client="127.0.0.1")
    assert OVERHEAD_HEADER.encode() in told and b"server-timing" in told
    assert untold == {} and wrong == {}  # passed by: no perfkit header
    [record] = records
    assert record.weight == 1


def test_a_sampled_parent_is_recorded_even_when_nothing_else_is(backend: Backend) -> None:
    served = Served(backend, record_ratio=0.0)
    with capture_records() as records:
        served.get(SAMPLED)
        served.get(UNSAMPLED)
        served.get()
    [record] = records
    assert record.traceparent == SAMPLED[1].decode() and record.weight == 1


def test_the_traced_rate_bounds_the_sampled_parents_recorded_beyond_the_choice(backend: Backend) -> None:
    served = Served(backend, record_ratio=0.0, record_traced_rate=2.0)
    traced_pace = served.middleware._traced_pace
    assert traced_pace is not None
    traced_pace._clock = lambda: 10**9  # every request within the same second
    with capture_records() as records:
        for _ in range(5):
            served.get(SAMPLED)
    assert len(records) == 2  # the rest were the choice's to make, and it records none


def test_requests_recorded_always_take_nothing_from_the_pace_and_the_weights_add_up(backend: Backend) -> None:
    """Between two records of the choice, secret holders and sampled parents are
    recorded with weight 1 and leave the pace and the count of the passed by
    as they were: every request is counted once."""
    served = Served(backend, header_secret="s3cret", record_rate=1.0)
    now = [10**9]
    served.clock_at(now)
    sequence: list[tuple[tuple[bytes, bytes], ...]] = [(), (), (SECRET,), (SAMPLED,), (), (UNSAMPLED,), (SECRET,)]
    with capture_records() as records:
        for headers in sequence:
            served.get(*headers)
        now[0] += 10**9  # the pace allows one more
        served.get()
    weights = [record.weight for record in records]
    # The pace's first two (two seconds' worth); the two secrets and the sampled parent;
    # a second later one standing for the two passed by and itself.
    assert weights == [1, 1, 1, 1, 1, 3]
    assert sum(weights) == len(sequence) + 1


def test_the_weight_is_on_the_record_for_every_backend(backend: Backend) -> None:
    served = Served(backend, record_rate=1.0)
    now = [10**9]
    served.clock_at(now)
    with capture_records() as records:
        for _ in range(6):
            served.get()
        now[0] += 10**9
        served.get()
    assert [(record.passed_by, record.weight) for record in records] == [(0, 1), (0, 1), (4, 5)]


def test_headers_as_lists_are_read_too(backend: Backend) -> None:
    """A server may give each header as a list: the full pass reads them (the C scan reads tuples only)."""
    served = Served(backend, header_secret="s3cret", record_ratio=0.0)
    with capture_records() as records:
        told = served.get([b"x-perfkit-secret", b"s3cret"], [b"accept", b"*/*"])  # type: ignore[arg-type]
    assert b"server-timing" in told and len(records) == 1
    assert served.seen == [[(b"host", b"x"), [b"accept", b"*/*"]]]
