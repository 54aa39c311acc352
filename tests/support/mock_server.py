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
def mock_process(*flags: str, pin_cpu: str | None = None) -> Iterator[str]:
    """``perfkit mock`` as its own process (no GIL shared with the client)."""
    import sys

    from litellm_perfkit._bench._procs import Children, free_port, port_open

    port = free_port()
    command = [sys.executable, "-m", "litellm_perfkit._cli", "mock", "--port", str(port), *flags]
    if pin_cpu is not None:
        command = ["taskset", "-c", pin_cpu, *command]
    with Children() as children:
        children.start("mock", command).wait_ready(lambda: port_open(port), timeout_s=20)
        yield f"http://127.0.0.1:{port}"
