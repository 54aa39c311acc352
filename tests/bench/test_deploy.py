"""The deployment users run (_bench/_deploy): the real proxy with virtual keys
and spend tracking in a private PostgreSQL, LiteLLM's database client served by
Prisma's wasm query engine through perfkit's adapter."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from litellm_perfkit._bench._by_key import by_key, compare_keys
from litellm_perfkit._bench._deploy import database_env, generate_key, spend_log_rows
from litellm_perfkit._bench._deploy._keys import key_spend
from litellm_perfkit._bench._deploy._postgres import Postgres, apply_migrations, create_database, start_postgres
from litellm_perfkit._bench._deploy._prisma import prisma_client
from litellm_perfkit._bench._launch import Children, start_mock
from litellm_perfkit._bench._options import MASTER_KEY, MODEL, config_template
from litellm_perfkit._bench._receiver import SpanReceiver
from litellm_perfkit._load._workload import key_index
from tests.support.litellm_env import litellm_python
from tests.support.proxy import litellm_proxy

pytestmark = [pytest.mark.integration, pytest.mark.litellm]

INPUT_COST, OUTPUT_COST = 1e-6, 2e-6  # per token: a priced model, so the key's spend grows
# The batch writer flushes every second (default 10 s): the test waits less.
CONFIG = (
    config_template().replace(
        "      api_key: fake-key\n",
        f"      api_key: fake-key\n      input_cost_per_token: {INPUT_COST}\n"
        f"      output_cost_per_token: {OUTPUT_COST}\n",
        1,
    )
    + "  proxy_batch_write_at: 1\n"
)
REQUESTS = 12

# prisma-client-py's query shapes LiteLLM uses, through the adapter, against
# what PostgreSQL holds: typed values both ways (Json, DateTime, NULLs), an
# atomic increment, raw SQL with a type adapter-pg does not map (`name`) and a
# NULL bigint, an interactive transaction, a batch, ordering by a DateTime.
CLIENT_SCRIPT = """
import asyncio, json
from prisma import Prisma

async def main():
    db = Prisma()
    await db.connect()
    table = db.litellm_verificationtoken
    made = await table.create(data={"token": "t1", "spend": 0.5, "metadata": json.dumps({"a": [1, "x"]})})
    found = await table.find_unique(where={"token": "t1"})
    raised = await table.update(where={"token": "t1"}, data={"spend": {"increment": 1.25}})
    raw = await db.query_raw("SELECT 'x'::name AS n, NULL::bigint AS b, 2::bigint AS c, now() AS t")
    async with db.tx() as tx:
        await tx.litellm_verificationtoken.update(where={"token": "t1"}, data={"spend": 10})
    batch = db.batch_()
    batch.litellm_verificationtoken.create(data={"token": "t2"})
    await batch.commit()
    latest = await table.find_first(order={"created_at": "desc"})
    print(json.dumps({
        "made": [made.token, made.metadata, made.created_at is not None],
        "found": [found.spend, found.metadata, found.expires],
        "raised": raised.spend,
        "raw": [raw[0]["n"], raw[0]["b"], raw[0]["c"], isinstance(raw[0]["t"], str)],
        "rows": await table.count(),
        "spend": (await table.find_unique(where={"token": "t1"})).spend,
        "latest": latest.token,
    }))
    await db.disconnect()

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """One cluster for the module; a database in it per LiteLLM version (their schemas differ)."""
    home = Path(tempfile.mkdtemp(prefix="perfkit-test-postgres-"))
    home.chmod(0o711)
    try:
        with Children() as children:
            yield start_postgres(children, home / "postgres")
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """One mock for the module: its response ids, the spend logs' keys, never repeat."""
    with Children() as children:
        yield start_mock(children)


def call(
    proxy: str,
    method: str,
    path: str,
    key: str,
    body: dict[str, Any] | None = None,
    extra: dict[str, str] | None = None,
) -> tuple[int, Any]:
    parts = urlsplit(proxy)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=60)
    try:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(extra or {})}
        connection.request(method, path, json.dumps(body).encode() if body else None, headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def chat(proxy: str, key: str, trace_id: str | None = None) -> tuple[int, Any]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}
    headers = {"traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01"} if trace_id else {}
    return call(proxy, "POST", "/v1/chat/completions", key, body, headers)


def trace_id_for(kind: int) -> str:
    """A trace id that names key ``kind`` (0 master, 1 virtual), as the bench's load chooses keys."""
    while key_index(trace_id := os.urandom(16).hex(), 2) != kind:
        pass
    return trace_id


def eventually(read: Callable[[], float], done: Callable[[float], bool], timeout_s: float = 60.0) -> float:
    deadline = time.monotonic() + timeout_s
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.5)
        value = read()
    return value


def test_the_adapter_serves_prisma_client_pys_queries(postgres: Postgres, tmp_path: Path) -> None:
    python = litellm_python("1.103.0")
    client = prisma_client(python)
    database = create_database(postgres, "adapter")
    apply_migrations(postgres.bin_dir, database, client.migrations)
    env = {**os.environ, **database_env(client, database)}
    result = subprocess.run(
        [str(python), "-c", CLIENT_SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got == {
        "made": ["t1", {"a": [1, "x"]}, True],
        "found": [0.5, {"a": [1, "x"]}, None],
        "raised": 1.75,
        "raw": ["x", None, 2, True],
        "rows": 2,
        "spend": 10.0,
        "latest": "t2",
    }


@pytest.mark.parametrize("version", ["1.103.0", "1.83.14"])
def test_virtual_keys_answer_and_their_spend_is_logged(
    version: str, postgres: Postgres, upstream: str, tmp_path: Path
) -> None:
    client = prisma_client(litellm_python(version))
    database = create_database(postgres, f"litellm_{version.replace('.', '_')}")
    apply_migrations(postgres.bin_dir, database, client.migrations)
    env = {**database_env(client, database), "OTEL_BSP_SCHEDULE_DELAY": "200"}
    with (
        SpanReceiver() as receiver,
        litellm_proxy(
            version,
            upstream,
            tmp_path,
            env=env,
            config=CONFIG,
            perfkit_args=("--endpoint", receiver.endpoint, "--protocol", "http/protobuf"),
        ) as proxy,
    ):
        assert call(proxy, "GET", "/health/readiness", MASTER_KEY)[1]["db"] == "connected"
        key = generate_key(proxy, MASTER_KEY)
        # The bench's load: the master key and the virtual key interleaved, each named by its request's trace id.
        traces = [(trace_id_for(0), trace_id_for(1)) for _ in range(REQUESTS)]
        answers = []
        for master_trace, virtual_trace in traces:
            assert chat(proxy, MASTER_KEY, master_trace)[0] == 200
            answers.append(chat(proxy, key, virtual_trace))
        assert [status for status, _ in answers] == [200] * REQUESTS
        assert chat(proxy, "sk-not-a-key")[0] == 401
        # Ground truth: the tokens the mock counted, at the config's prices.
        cost = sum(
            a["usage"]["prompt_tokens"] * INPUT_COST + a["usage"]["completion_tokens"] * OUTPUT_COST for _, a in answers
        )
        rows = eventually(lambda: spend_log_rows(database, key), lambda n: n >= REQUESTS)
        assert rows == REQUESTS
        spend = eventually(lambda: key_spend(database, key), lambda s: s >= cost * (1 - 1e-6))
        assert spend == pytest.approx(cost, rel=1e-6)
        # Every request's server span, the last ones exported after the spend log's rows are in.
        sent = {t for pair in traces for t in pair}
        spans: list[Any] = []

        def servers_arrived() -> float:
            spans.extend(receiver.take())
            return len(sent & {s["trace_id"] for s in spans if s["kind"] == 2})

        assert eventually(servers_arrived, lambda n: n >= len(sent)) == len(sent)
        # perfkit's fast-path attributes name LiteLLM's spend logger among the proxy's callbacks.
        servers = [s for s in spans if s["kind"] == 2 and "perfkit.litellm.callbacks" in s["attrs"]]
        assert servers, "no server span with the fast-path attributes arrived"
        assert "_ProxyDBLogger" in str(servers[-1]["attrs"]["perfkit.litellm.callbacks"]).split(",")
        # The bench's comparison by key: auth's own CPU with each, from the requests each key sent.
        keys = compare_keys([by_key(spans, sent)])
        assert keys["requests"] == {"master": REQUESTS, "virtual": REQUESTS}
        auth = keys["stages"][0]
        assert auth["stage"] == "auth" and auth["master_ms"] > 0 and auth["virtual_ms"] > 0, auth
        assert auth["low_ms"] is not None and auth["high_ms"] is not None
