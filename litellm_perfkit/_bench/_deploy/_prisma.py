"""LiteLLM's database client without Prisma's native engines.

LiteLLM talks to Postgres through prisma-client-py, which runs Prisma's native
query engine, downloaded from Prisma's own host only. This runs Prisma's
WebAssembly query engine from npm instead, under ``node``, behind
``prisma_engine.mjs`` (prisma-client-py's engine API on one side, the wasm
engine and its pg driver adapter on the other). Installed on first use and
cached under ``$PERFKIT_CACHE_DIR``, like the LiteLLM venvs:

- ``prisma-engine-<engine>/``: the npm packages at the exact versions of this
  directory's ``package-lock.json`` (the wasm engine, adapter-pg, pg, and the
  Prisma CLI that ``prisma generate`` runs), and two small programs: the query
  engine prisma-client-py starts, and a schema engine that only says its
  version (nothing here runs a schema engine: the schema comes from psql);
- ``prisma-client-<venv>/``: prisma-client-py 0.11.0 (the newest LiteLLM
  1.103.0 connects with), its client generated from that LiteLLM's
  ``schema.prisma``; the proxy gets it on ``PYTHONPATH``, so the venv itself,
  and every proxy run without a database, stay as they were.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..._wire._environment_variables import (
    PRISMA_BINARY_CACHE_DIR,
    PRISMA_EXPECTED_ENGINE_VERSION,
    PRISMA_HIDE_UPDATE_MESSAGE,
    PRISMA_QUERY_ENGINE_BINARY,
    PRISMA_SCHEMA_ENGINE_BINARY,
    PRISMA_VERSION,
)
from .._heartbeat import Say, waiting
from .._venvs import CACHE, cache_lock
from ._postgres import DeployError

__all__ = ["ENGINE_COMMIT", "ENGINE_NOTE", "PRISMA_CLIENT", "PrismaClient", "prisma_client"]

PRISMA_CLIENT = "0.11.0"
ENGINE_VERSION = "5.17.0"
ENGINE_COMMIT = "393aa359c9ad4a4bb28630fb5613f9c281cde053"
ENGINE_NOTE = (
    f"LiteLLM's database client runs Prisma's WebAssembly query engine {ENGINE_VERSION} under node "
    "(perfkit's adapter), not Prisma's native engine: its query latency and CPU may differ"
)
HERE = Path(__file__).resolve().parent
ADAPTER = HERE / "prisma_engine.mjs"
NPM_FILES = ("package.json", "package-lock.json")


@dataclass(frozen=True)
class PrismaClient:
    """What a proxy with a database needs: its environment, and where LiteLLM's migrations are."""

    env: dict[str, str]
    migrations: Path


def _run(command: list[str], what: str, **kwargs: object) -> None:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip()[-600:]
        raise DeployError(f"{what} failed: {tail}")


def _write_program(path: Path, text: str) -> None:
    """Written whole then renamed: a concurrent run never starts half a file."""
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_text(text)
    partial.chmod(0o755)
    partial.replace(path)


def engine_dir(say: Say | None = None) -> Path:
    """The npm packages (installed once) and the two engine programs."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise DeployError("the postgres deployment needs Node.js 18 or newer (node, npm): apt-get install nodejs npm")
    lock = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in NPM_FILES)).hexdigest()[:12]
    home = CACHE / f"prisma-engine-{ENGINE_VERSION}-{lock}"
    with cache_lock(home.parent / f"{home.name}.lock"):
        if not (home / ".complete").exists():
            home.mkdir(parents=True, exist_ok=True)
            for name in NPM_FILES:
                shutil.copyfile(HERE / name, home / name)
            with waiting(say, f"installing Prisma's wasm query engine from npm into {home} (once)"):
                # --ignore-scripts: the Prisma CLI's install scripts would fetch native engines.
                _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], "npm ci", cwd=home)
            (home / ".complete").write_text(lock)
        modules = home / "node_modules"
        _write_program(home / "query-engine", f'#!/bin/sh\nexec "{node}" "{ADAPTER}" --node-modules "{modules}" "$@"\n')
        _write_program(home / "schema-engine", f"#!/bin/sh\necho schema-engine-cli {ENGINE_COMMIT}\n")
    return home


def _litellm_dirs(python: Path) -> tuple[Path, Path]:
    """(litellm's package directory, litellm_proxy_extras's migrations), without importing them."""
    found = subprocess.run(
        [
            str(python),
            "-I",
            "-c",
            "import importlib.util as u\n"
            "for name in ('litellm', 'litellm_proxy_extras'):\n"
            "    spec = u.find_spec(name)\n"
            "    print(spec.submodule_search_locations[0] if spec else '-')",
        ],
        capture_output=True,
        text=True,
    )
    lines = found.stdout.split("\n")
    if found.returncode != 0 or len(lines) < 2 or "-" in lines[:2]:
        raise DeployError(f"{python} has no litellm with litellm_proxy_extras: install litellm[proxy]")
    return Path(lines[0]), Path(lines[1]) / "migrations"


# prisma-client-py's requirements (import name: requirement); LiteLLM's venv
# has most. Only the missing ones go beside it, so none shadows LiteLLM's own.
CLIENT_REQUIREMENTS = {
    "httpx": "httpx",
    "jinja2": "jinja2",
    "pydantic": "pydantic",
    "click": "click",
    "dotenv": "python-dotenv",
    "typing_extensions": "typing-extensions",
    "tomlkit": "tomlkit",
    "nodeenv": "nodeenv",
}


def _missing_requirements(python: Path) -> list[str]:
    check = subprocess.run(
        [
            str(python),
            "-I",
            "-c",
            "import importlib.util as u, sys\nfor n in sys.argv[1:]: print(n, u.find_spec(n) is None)",
        ]
        + list(CLIENT_REQUIREMENTS),
        capture_output=True,
        text=True,
        check=True,
    )
    return [
        CLIENT_REQUIREMENTS[name]
        for name, missing in (line.split() for line in check.stdout.splitlines())
        if missing == "True"
    ]


def prisma_client(python: Path, say: Say | None = None) -> PrismaClient:
    """prisma-client-py for the LiteLLM in ``python``'s venv, generated from its
    schema (once per schema), and the environment its proxy runs with."""
    engines = engine_dir(say)
    litellm_dir, migrations = _litellm_dirs(python)
    schema = litellm_dir / "proxy" / "schema.prisma"
    tag = hashlib.sha256(schema.read_bytes() + ENGINE_COMMIT.encode()).hexdigest()[:12]
    target = CACHE / "prisma-clients" / f"{python.parent.parent.name}-{tag}"
    env = {
        PRISMA_QUERY_ENGINE_BINARY: str(engines / "query-engine"),
        PRISMA_SCHEMA_ENGINE_BINARY: str(engines / "schema-engine"),
        PRISMA_BINARY_CACHE_DIR: str(engines),
        PRISMA_VERSION: ENGINE_VERSION,
        PRISMA_EXPECTED_ENGINE_VERSION: ENGINE_COMMIT,
        PRISMA_HIDE_UPDATE_MESSAGE: "1",
        "PYTHONPATH": str(target),
    }
    with cache_lock(target.parent / f"{target.name}.lock"):
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            with waiting(say, f"installing prisma-client-py {PRISMA_CLIENT} into {target} and generating it (once)"):
                _run(
                    [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
                    + ["--target", str(target), f"prisma=={PRISMA_CLIENT}", *_missing_requirements(python)],
                    "pip install prisma",
                )
                # The Prisma CLI runs the generator as the `prisma-client-py` command.
                path = os.pathsep.join((str(target / "bin"), str(python.parent), os.environ.get("PATH", "")))
                generate = {**os.environ, **env, "PATH": path}
                command = [str(python), "-m", "prisma", "generate", "--schema", str(schema)]
                _run(command, "prisma generate", env=generate, cwd=target)
            (target / ".complete").write_text(tag)
    return PrismaClient(env, migrations)


if __name__ == "__main__":  # python -m litellm_perfkit._bench._deploy._prisma PYTHON: prepare, print the env
    print(prisma_client(Path(sys.argv[1]), print).env)
