"""A private PostgreSQL for the proxy's database: ``initdb`` into a directory
of the run, ``postgres`` on a free port of 127.0.0.1 (TCP only, trust
authentication for its one local user), stopped with the run's ``Children``;
LiteLLM's schema applied from the migrations its ``litellm_proxy_extras``
wheel ships (Prisma's schema engine is not needed)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .._launch import Child, Children, free_port

__all__ = ["DeployError", "Postgres", "apply_migrations", "create_database", "postgres_bin", "start_postgres"]

DATABASE = "litellm"
USER = "litellm"
# Where Debian puts the server's programs (initdb and postgres are not on PATH there).
DEBIAN_ROOT = Path("/usr/lib/postgresql")


class DeployError(RuntimeError):
    """A deployment part that cannot start; the message says what to install or change."""


@dataclass(frozen=True)
class Postgres:
    url: str  # its maintenance database, ``postgres``
    port: int
    child: Child
    bin_dir: Path


def postgres_bin() -> Path:
    """The directory holding initdb, postgres and psql: from PATH, else Debian's newest."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).parent] if on_path else []
    if DEBIAN_ROOT.is_dir():
        versions = sorted(DEBIAN_ROOT.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0, reverse=True)
        candidates += [v / "bin" for v in versions]
    for bin_dir in candidates:
        if all((bin_dir / tool).exists() for tool in ("initdb", "postgres", "psql")):
            return bin_dir
    raise DeployError(
        "the postgres deployment needs PostgreSQL's server (initdb, postgres, psql): "
        "install it (Debian: apt-get install postgresql)"
    )


def _as_server_user(command: list[str], data_parent: Path) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as Debian's ``postgres`` user."""
    if os.geteuid() != 0:
        return command
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise DeployError(
            "PostgreSQL cannot run as root and there is no 'postgres' user: run as another user, "
            "or install Debian's postgresql package (it adds the user)"
        ) from None
    os.chown(data_parent, user.pw_uid, user.pw_gid)
    runuser = shutil.which("runuser")
    if runuser is None:
        raise DeployError("running as root, the postgres deployment needs runuser (util-linux) to start PostgreSQL")
    return [runuser, "-u", "postgres", "--", *command]


def start_postgres(children: Children, home: Path, timeout_s: float = 60.0) -> Postgres:
    """A new cluster in ``home`` (a directory every user can reach: the server
    may run as another user); ``create_database`` adds LiteLLM's databases."""
    bin_dir = postgres_bin()
    home.mkdir(parents=True, exist_ok=True)
    data = home / "data"
    initdb = _as_server_user(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync"], home
    )
    result = subprocess.run(initdb, capture_output=True, text=True, cwd=home)
    if result.returncode != 0:
        raise DeployError(f"initdb failed: {(result.stderr or result.stdout).strip()[-400:]}")
    port = free_port()
    server = _as_server_user(
        [
            str(bin_dir / "postgres"),
            "-D",
            str(data),
            "-p",
            str(port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "unix_socket_directories=",
        ],
        home,
    )
    child = children.start(f"postgres-{port}", server, cwd=home, log_path=home / "postgres.log")
    admin = f"postgresql://{USER}@127.0.0.1:{port}/postgres"

    def ready() -> bool:
        try:
            check = subprocess.run([str(bin_dir / "psql"), admin, "-Atc", "SELECT 1"], capture_output=True, timeout=10)
        except subprocess.TimeoutExpired:
            return False
        return check.returncode == 0

    child.wait_ready(ready, timeout_s)
    return Postgres(admin, port, child, bin_dir)


def create_database(postgres: Postgres, name: str = DATABASE) -> str:
    """A new database in the cluster (a LiteLLM version's schema each); its URL."""
    _psql(postgres.bin_dir, postgres.url, "-c", f'CREATE DATABASE "{name}"')
    return f"postgresql://{USER}@127.0.0.1:{postgres.port}/{name}"


def _psql(bin_dir: Path, url: str, *args: str) -> None:
    # Notices (a migration's "already exists, skipping") are not failures.
    env = {**os.environ, "PGOPTIONS": "-c client_min_messages=warning"}
    result = subprocess.run(
        [str(bin_dir / "psql"), url, "-q", "-v", "ON_ERROR_STOP=1", *args], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise DeployError(f"psql failed on {url}: {result.stderr.strip()[-400:]}")


def apply_migrations(bin_dir: Path, database_url: str, migrations: Path) -> float:
    """LiteLLM's migrations (``<migrations>/*/migration.sql``, in name order:
    the order Prisma applies them) in one psql session; the seconds it took."""
    files = sorted(migrations.glob("*/migration.sql"))
    if not files:
        raise DeployError(f"no LiteLLM migrations under {migrations}: is litellm_proxy_extras installed?")
    started = time.monotonic()
    _psql(bin_dir, database_url, *(arg for f in files for arg in ("-f", str(f))))
    return time.monotonic() - started
