"""Several keys interleaved by trace id, and a load spread over several
instances of one server (_load/_workload.py, _load/_runner.py)."""

from __future__ import annotations

import asyncio
import random

from litellm_perfkit._load._runner import _Pool
from litellm_perfkit._load._workload import Workload, key_index


def _authorization(request: bytes) -> str:
    head = request.split(b"\r\n\r\n", 1)[0].decode()
    return next(line for line in head.split("\r\n") if line.startswith("Authorization: "))


def test_each_request_carries_the_key_its_trace_id_names() -> None:
    workload = Workload(url="http://127.0.0.1:9/v1", api_keys=("sk-master", "sk-virtual"))
    rng = random.Random(1)
    seen = {0: 0, 1: 0}
    for _ in range(400):
        request, trace_id, _ = workload.build(rng)
        index = key_index(trace_id, 2)
        assert _authorization(request) == f"Authorization: Bearer {('sk-master', 'sk-virtual')[index]}"
        seen[index] += 1
    # Trace ids are random: the two keys share the load about evenly.
    assert 150 < seen[0] < 250


def test_one_key_is_sent_as_before() -> None:
    request, _, _ = Workload(url="http://127.0.0.1:9/v1", api_key="sk-1").build(random.Random(1))
    assert _authorization(request) == "Authorization: Bearer sk-1"


def test_new_connections_go_to_each_instance_in_turn() -> None:
    async def main() -> list[int]:
        accepted: list[int] = []
        servers = []
        for n in range(3):

            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int = n) -> None:
                accepted.append(n)

            servers.append(await asyncio.start_server(handle, "127.0.0.1", 0))
        ports = [s.sockets[0].getsockname()[1] for s in servers]
        pool = _Pool(Workload(url=f"http://127.0.0.1:{ports[0]}/v1", instance_ports=tuple(ports[1:])), 5.0)
        connections = [await pool.get() for _ in range(7)]
        await asyncio.sleep(0.1)
        for connection in connections:
            assert connection.transport is not None
            connection.transport.close()
        for server in servers:
            server.close()
        return accepted

    assert sorted(asyncio.run(main())) == [0, 0, 0, 1, 1, 2, 2]
