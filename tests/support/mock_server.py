"""The mock provider for tests: in a background thread, or as its own process."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from litellm_perfkit._bench._launch import Children, start_mock
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
    with Children() as children:
        yield start_mock(children, *flags, pin_cpu=pin_cpu, timeout_s=20)
