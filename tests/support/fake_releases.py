"""Real releases of a small gateway, ``fakegw``, as wheels: its stages hash a known
number of bytes per request in named functions, so a release's CPU step, its
stage and its function are known (perfkit bisect's ground truth). One function,
``flush_log``, can do its requests' work in lumps, every ``lump_every`` requests
at once, as a full collection of a large heap comes: a cost that lands in few
of a pair's rounds."""

from __future__ import annotations

import zipfile
from pathlib import Path

GATEWAY = '''"""fakegw {version}: a gateway in front of the mock; its stages burn CPU in named functions."""
import argparse, contextlib, hashlib, os

import httpx, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import litellm_perfkit
from litellm_perfkit import stage
from litellm_perfkit.profiling import StageProfiler

WORK = {work}  # function -> bytes it hashes per request in this release (on average: flush_log)
LUMP_EVERY = {lump_every}  # flush_log hashes this many requests' bytes every this many requests
SERVED = [0]
DATA = memoryview(bytes(range(256)) * 32_000)  # real pages, not the kernel's shared zero page


# Work counted in bytes hashed, not in CPU time: under contention it costs more CPU, as real code does.
def check_key():
    return hashlib.sha256(DATA[: WORK["check_key"]]).digest()


def check_quota():
    return hashlib.sha256(DATA[: WORK["check_quota"]]).digest()


def pick_route():
    return hashlib.sha256(DATA[: WORK["pick_route"]]).digest()


def flush_log():
    left = WORK["flush_log"] * LUMP_EVERY
    while left > 0:
        hashlib.sha256(DATA[: min(left, len(DATA))]).digest()
        left -= len(DATA)


def build(upstream, on_shutdown):
    client = httpx.AsyncClient(base_url=upstream, timeout=60)

    async def chat(request):
        body = await request.body()
        with stage("auth"):
            check_key()
            if WORK["check_quota"]:
                check_quota()
        with stage("route"):
            pick_route()
        SERVED[0] += 1
        if WORK["flush_log"] and SERVED[0] % LUMP_EVERY == 0:
            with stage("logging"):
                flush_log()
        async with stage("upstream"):
            response = await client.send(client.build_request("POST", "/v1/chat/completions", content=body), stream=True)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            async def relay():
                async for chunk in response.aiter_raw():
                    yield chunk
                await response.aclose()
            return StreamingResponse(relay(), media_type="text/event-stream")
        return Response(await response.aread(), media_type="application/json")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        for action in on_shutdown:
            action()

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])], lifespan=lifespan)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    litellm_perfkit.configure()
    profiles = os.environ.get("PERFKIT_STAGE_PROFILE_DIR")
    profiler = StageProfiler() if profiles else None
    shutdown = [] if profiler is None else [lambda: (profiler.stop(), profiler.write(profiles, prefix=f"stages-{{os.getpid()}}"))]
    if profiler is not None:
        profiler.start()
    app = litellm_perfkit.PerfkitMiddleware(build(args.upstream, shutdown))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
'''


BASE_WORK = {"check_key": 1_000_000, "check_quota": 0, "pick_route": 500_000, "flush_log": 0}
"""Bytes each function hashes per request: 1.5 MB, about 1.3 ms of CPU on this machine."""


def release_wheels(directory: Path, work_by_version: dict[str, dict[str, int]], lump_every: int = 1) -> None:
    """One wheel per release of ``fakegw``: a module and its metadata, nothing else;
    each release's functions hash ``BASE_WORK`` bytes per request, changed by its entry,
    ``flush_log``'s in lumps of ``lump_every`` requests' bytes (counted from the process's first request)."""
    for version, changed in work_by_version.items():
        info = f"fakegw-{version}.dist-info"
        files = {
            "fakegw.py": GATEWAY.format(version=version, work=repr({**BASE_WORK, **changed}), lump_every=lump_every),
            f"{info}/METADATA": f"Metadata-Version: 2.1\nName: fakegw\nVersion: {version}\n",
            f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: perfkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        }
        files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
        with zipfile.ZipFile(directory / f"fakegw-{version}-py3-none-any.whl", "w") as wheel:
            for name, text in files.items():
                wheel.writestr(name, text)
