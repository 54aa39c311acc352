"""Run the standalone mock server in a background thread (its own event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from litellm_perfkit.mock import MockConfig, start_servers


@contextlib.contextmanager
def mock_server(config: MockConfig) -> Iterator[list[str]]:
    """Yields the base URL (http://127.0.0.1:PORT) of each deployment."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = asyncio.run_coroutine_threadsafe(start_servers(config), loop).result(10)
    try:
        yield [f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers]
    finally:

        async def stop() -> None:
            for server in servers:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextlib.contextmanager
def mock_process(*flags: str) -> Iterator[str]:
    """``perfkit mock`` as its own process (no GIL shared with the test's client)."""
    import socket
    import subprocess
    import sys
    import time

    from tests.support.servers import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "litellm_perfkit._cli", "mock", "--port", str(port), *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"perfkit mock did not start: {process.stderr.read().decode() if process.stderr else ''}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)
