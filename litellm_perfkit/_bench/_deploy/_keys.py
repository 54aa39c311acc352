"""Virtual keys through the proxy's own API, and what its database recorded."""

from __future__ import annotations

import hashlib
import http.client
import json
import subprocess
from typing import Any
from urllib.parse import urlsplit

from ..._wire._names import JSON_CONTENT_TYPE
from ._postgres import DeployError, postgres_bin

__all__ = ["generate_key", "spend_log_rows", "key_spend"]


def generate_key(proxy_url: str, master_key: str, **limits: Any) -> str:
    """A new virtual key (``/key/generate``, with ``limits`` such as
    ``rpm_limit`` or ``max_budget``); the key itself."""
    parts = urlsplit(proxy_url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=60)
    try:
        body = json.dumps(limits).encode()
        headers = {"Authorization": f"Bearer {master_key}", "Content-Type": JSON_CONTENT_TYPE}
        connection.request("POST", "/key/generate", body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read().decode(errors="replace")
    finally:
        connection.close()
    if response.status != 200:
        raise DeployError(f"/key/generate answered {response.status}: {answer[:300]}")
    return str(json.loads(answer)["key"])


def _query(database_url: str, sql: str) -> str:
    result = subprocess.run(
        [str(postgres_bin() / "psql"), database_url, "-Atc", sql], capture_output=True, text=True, timeout=30
    )
    if result.returncode != 0:
        raise DeployError(f"psql failed: {result.stderr.strip()[-300:]}")
    return result.stdout.strip()


def hashed(key: str) -> str:
    """A virtual key as LiteLLM stores it."""
    return hashlib.sha256(key.encode()).hexdigest()


def spend_log_rows(database_url: str, key: str | None = None, status: str | None = None) -> int:
    """Rows in ``LiteLLM_SpendLogs`` (one per request, once the batch writer
    has flushed), all of them or ``key``'s, of any status or ``status``'s."""
    conditions = [f"api_key = '{hashed(key)}'"] if key is not None else []
    if status is not None:
        conditions.append(f"status = '{status}'")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return int(_query(database_url, f'SELECT count(*) FROM "LiteLLM_SpendLogs"{where}'))


def key_spend(database_url: str, key: str) -> float:
    """The spend recorded on a virtual key."""
    return float(_query(database_url, f"SELECT spend FROM \"LiteLLM_VerificationToken\" WHERE token = '{hashed(key)}'"))
