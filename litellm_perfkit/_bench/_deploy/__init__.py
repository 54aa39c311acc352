"""The deployment a proxy runs in: nothing beside it (``plain``), or the one
users run, with virtual keys and spend tracking in a private PostgreSQL
(``postgres``), and a private Redis for shared state too (``postgres+redis``).

Everything binds 127.0.0.1 on free ports, lives in a temporary directory and
stops when the block ends (Ctrl-C and SIGTERM too: ``Children``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from ..._wire._environment_variables import DATABASE_URL, DISABLE_SCHEMA_UPDATE, REDIS_HOST, REDIS_PORT
from ...types import BenchDeployment
from .._heartbeat import Say
from .._launch import Children
from ._keys import generate_key, spend_log_rows
from ._postgres import DeployError, apply_migrations, create_database, postgres_bin, start_postgres
from ._prisma import ENGINE_NOTE, PrismaClient, prisma_client
from ._redis import start_redis

__all__ = [
    "DEPLOYMENTS",
    "Deployed",
    "DeployError",
    "DeploymentMode",
    "ENGINE_NOTE",
    "database_env",
    "deployment",
    "generate_key",
    "preflight",
    "spend_log_rows",
]

DeploymentMode = BenchDeployment
DEPLOYMENTS: tuple[DeploymentMode, ...] = get_args(BenchDeployment)


@dataclass(frozen=True)
class Deployed:
    """A running deployment: what its proxies add to their environment and
    config, and how long each part took to start."""

    mode: DeploymentMode
    env: dict[str, str] = field(default_factory=dict)
    router_settings: dict[str, str] = field(default_factory=dict)  # merged into the config's router_settings
    database_url: str | None = None
    redis_url: str | None = None
    startup_s: dict[str, float] = field(default_factory=dict)

    def config(self, template: str, router_settings: dict[str, str]) -> str:
        """A proxy's config: ``template`` (without router settings), its own
        ``router_settings`` and the deployment's."""
        settings = {**router_settings, **self.router_settings}
        return template + (
            "router_settings:\n" + "".join(f"  {k}: {v}\n" for k, v in settings.items()) if settings else ""
        )

    def describe(self) -> str:
        """One line for a report: what ran beside the proxy."""
        if self.mode == "plain":
            return "plain: the proxy alone (master key, no database, no Redis)"
        parts = ["virtual keys and spend tracking in a private PostgreSQL"]
        if self.redis_url:
            parts.append("rate-limit counters and router state in a private Redis")
        return f"{self.mode}: {', '.join(parts)}; {ENGINE_NOTE}"


def preflight(mode: DeploymentMode) -> None:
    """The programs ``mode`` needs are here: one line naming what to install, before any work."""
    if mode == "plain":
        return
    postgres_bin()
    for program, package in (("node", "nodejs"), ("npm", "npm")) + (
        (("redis-server", "redis-server"),) if mode == "postgres+redis" else ()
    ):
        if shutil.which(program) is None:
            raise DeployError(f"--deployment {mode} needs {program}: install it (Debian: apt-get install {package})")


def database_env(client: PrismaClient, database_url: str) -> dict[str, str]:
    """What a proxy needs in its environment to use ``database_url``."""
    return {
        **client.env,
        "PYTHONPATH": os.pathsep.join(filter(None, (client.env["PYTHONPATH"], os.environ.get("PYTHONPATH")))),
        DATABASE_URL: database_url,
        DISABLE_SCHEMA_UPDATE: "True",
    }


@contextlib.contextmanager
def deployment(mode: DeploymentMode, python: Path | None, say: Say | None = None) -> Iterator[Deployed]:
    """Start ``mode``'s parts for the LiteLLM whose venv's interpreter is
    ``python`` (its schema and database client), yield them, stop them."""
    if mode == "plain":
        yield Deployed(mode)
        return
    if python is None:
        raise DeployError(
            f"--deployment {mode} needs --litellm-version: perfkit prepares that LiteLLM's database client"
        )
    started = time.monotonic()
    client = prisma_client(python, say)
    startup = {"database client": time.monotonic() - started}
    home = Path(tempfile.mkdtemp(prefix="perfkit-deploy-"))
    home.chmod(0o711)  # PostgreSQL may run as another user, in a directory of its own here
    try:
        with Children() as children:
            started = time.monotonic()
            postgres = start_postgres(children, home / "postgres")
            database_url = create_database(postgres)
            startup["postgres"] = time.monotonic() - started
            startup["schema"] = apply_migrations(postgres.bin_dir, database_url, client.migrations)
            env = database_env(client, database_url)
            router: dict[str, str] = {}
            redis_url = None
            if mode == "postgres+redis":
                started = time.monotonic()
                redis = start_redis(children, home)
                startup["redis"] = time.monotonic() - started
                env.update({REDIS_HOST: "127.0.0.1", REDIS_PORT: str(redis.port)})
                router = {"redis_host": "127.0.0.1", "redis_port": str(redis.port)}
                redis_url = redis.url
            yield Deployed(mode, env, router, database_url, redis_url, startup)
    finally:
        shutil.rmtree(home, ignore_errors=True)
