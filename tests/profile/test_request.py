"""Per-request profiles: only a caller with the secret gets one, and nothing leaks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from litellm_perfkit._core._guard import internal_error_counts
from litellm_perfkit.profiling import RequestProfileMiddleware

SECRET = "s3cret-token"
seen_headers: list[dict[str, str]] = []


def slow_handler_work() -> int:
    return sum(i * i for i in range(40_000))


async def chat(request: Request) -> Response:
    seen_headers.append(dict(request.headers))
    slow_handler_work()
    await asyncio.sleep(0.002)
    return JSONResponse({"ok": True})


def app(directory: Path, secret: str | None = SECRET, **kwargs: Any) -> RequestProfileMiddleware:
    return RequestProfileMiddleware(
        Starlette(routes=[Route("/chat", chat, methods=["POST"])]), secret=secret, directory=directory, **kwargs
    )


def post(application: Any, headers: dict[str, str] | None = None, count: int = 1) -> list[httpx.Response]:
    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://test") as client:
            return list(await asyncio.gather(*(client.post("/chat", headers=headers or {}) for _ in range(count))))

    return asyncio.run(run())


def test_the_right_token_gets_a_profile_and_its_id(tmp_path: Path) -> None:
    seen_headers.clear()
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    (response,) = post(
        app(tmp_path), {"x-perfkit-profile": SECRET, "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    )
    assert response.status_code == 200 and response.json() == {"ok": True}
    profile_id = response.headers["x-perfkit-profile-id"]
    assert profile_id.endswith(trace_id)  # joins the profile to the request's trace
    html = (tmp_path / f"{profile_id}.html").read_text()
    speedscope = json.loads((tmp_path / f"{profile_id}.speedscope.json").read_text())
    assert "slow_handler_work" in html
    assert any(frame["name"] == "slow_handler_work" for frame in speedscope["shared"]["frames"])
    assert "x-perfkit-profile" not in seen_headers[-1]  # the app never sees the token


def test_no_token_or_a_wrong_one_writes_nothing_and_leaks_nothing(tmp_path: Path) -> None:
    seen_headers.clear()
    application = app(tmp_path)
    for headers in ({}, {"x-perfkit-profile": "wrong"}, {"x-perfkit-profile": SECRET + "x"}, {"x-perfkit-profile": ""}):
        (response,) = post(application, headers)
        assert response.status_code == 200
        assert not [h for h in response.headers if h.startswith("x-perfkit-profile")], response.headers
        assert SECRET not in str(response.headers) and SECRET not in response.text
    assert list(tmp_path.iterdir()) == []
    assert all("x-perfkit-profile" not in h for h in seen_headers)


def test_without_a_secret_the_feature_is_off(tmp_path: Path) -> None:
    (response,) = post(app(tmp_path, secret=None), {"x-perfkit-profile": SECRET})
    assert response.status_code == 200 and "x-perfkit-profile-id" not in response.headers
    assert list(tmp_path.iterdir()) == []


def test_profiles_are_bounded_in_number_and_concurrency(tmp_path: Path) -> None:
    application = app(tmp_path, max_profiles=3, max_concurrent=2)
    responses = post(application, {"x-perfkit-profile": SECRET}, count=6)
    profiled = [r for r in responses if "x-perfkit-profile-id" in r.headers]
    assert all(r.status_code == 200 for r in responses)
    assert 1 <= len(profiled) <= 2  # concurrent ones beyond max_concurrent are served unprofiled
    for _ in range(5):
        post(application, {"x-perfkit-profile": SECRET})
    assert len(list(tmp_path.glob("*.html"))) == 3
    assert application.written == 3


def test_a_failing_profiler_never_changes_the_response(tmp_path: Path, monkeypatch: Any) -> None:
    import pyinstrument

    def broken(self: Any) -> None:
        raise RuntimeError("profiler broke")

    def counted() -> int:
        return internal_error_counts().get("request profile", 0)

    monkeypatch.setattr(pyinstrument.Profiler, "start", broken)
    before = counted()
    application = app(tmp_path)
    (response,) = post(application, {"x-perfkit-profile": SECRET})
    assert response.status_code == 200 and response.json() == {"ok": True}
    assert "x-perfkit-profile-id" not in response.headers
    assert counted() == before + 1 and application.written == 0
    # a directory that cannot be written: served, counted, not raised
    monkeypatch.undo()
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    application = app(blocked)
    (response,) = post(application, {"x-perfkit-profile": SECRET})
    assert response.status_code == 200 and response.json() == {"ok": True}
    assert counted() == before + 2 and application.written == 0
    assert application.active == 0  # the failed profile gave its slot back


def test_without_pyinstrument_a_secret_is_refused_at_setup(tmp_path: Path, monkeypatch: Any) -> None:
    import sys

    import pytest

    monkeypatch.setitem(sys.modules, "pyinstrument", None)
    with pytest.raises(RuntimeError, match=r"pip install 'litellm_perfkit\[profile\]'"):
        app(tmp_path)
    app(tmp_path, secret=None)  # off: no need for it
