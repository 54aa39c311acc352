"""What users install: the wheel and the sdist, with and without a C compiler,
with no extras, and every extra beside a user's pinned LiteLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.litellm_env import litellm_python

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], capture_output=True, text=True, timeout=900
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    yield out


def fresh_venv(path: Path, install: str, env: dict[str, str] | None = None) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", install],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return path / "bin" / "perfkit"


def perfkit(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120, cwd=script.parent)


def test_the_wheel_with_no_extras_gives_a_working_cli(dist: Path, tmp_path: Path) -> None:
    [wheel] = dist.glob("*.whl")
    script = fresh_venv(tmp_path / "venv", str(wheel))
    version = perfkit(script, "--version")
    assert version.returncode == 0 and "(request path: C accelerator)" in version.stdout, version.stderr
    for command in ("mock", "load", "bench", "run", "report", "compare", "flamegraph", "schema"):
        result = perfkit(script, command, "--help")
        assert result.returncode == 0 and "Traceback" not in result.stderr, (command, result.stderr[-1000:])
    # Something that needs a missing extra: one line naming it, exit 2, before any work.
    missing = perfkit(script, "bench", "--driver", "locust", "--proxy-url", "http://127.0.0.1:9")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines() == [
        "perfkit bench: error: --driver locust needs Locust: pip install 'litellm_perfkit[locust]'"
    ]
    # No framework and no OpenTelemetry SDK come with it; the sdk exporter without the SDK is one line.
    python = str(script.parent / "python")
    absent = "import importlib.util as u; print([m for m in ('starlette', 'opentelemetry.sdk') if u.find_spec(m)])"
    assert subprocess.run([python, "-c", absent], capture_output=True, text=True).stdout.strip() == "[]"
    sdk = "import litellm_perfkit as p; p.configure(exporter='sdk'); p.shutdown()"
    chosen = subprocess.run([python, "-c", sdk], capture_output=True, text=True, timeout=60)
    assert chosen.returncode == 0 and chosen.stderr.strip().splitlines() == [
        "perfkit: OTEL_TRACES_EXPORTER=sdk needs the OpenTelemetry SDK (pip install 'litellm_perfkit[sdk]'); "
        "spans are not exported"
    ], chosen.stderr
    # OTLP over gRPC without grpcio (the cli extra brings it): one line naming the extra, then HTTP.
    app = [python, str(ROOT / "tests" / "support" / "protocol_app.py"), "1"]
    grpc_env = {
        "PATH": os.environ["PATH"],
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
    }
    grpc = subprocess.run(app, capture_output=True, text=True, timeout=60, env=grpc_env)
    assert grpc.returncode == 0 and "Traceback" not in grpc.stderr, grpc.stderr
    assert grpc.stderr.splitlines()[0] == (
        "perfkit: OTLP over grpc needs grpcio: pip install 'litellm_perfkit[cli]' (or [otlp]); using http/protobuf on port 4318"
    )
    bar = perfkit(script, "load", "--url", "http://127.0.0.1:9", "--requests", "1", "--progress", "on")
    assert bar.returncode == 2 and bar.stderr.strip().splitlines() == [
        "perfkit load: error: this needs rich, which the 'cli' extra installs: pip install 'litellm_perfkit[cli]'"
    ]


@pytest.mark.parametrize(
    ("compiler", "path"), [("cc", "C accelerator"), ("/bin/false", "pure Python, the C accelerator is not built")]
)
def test_the_sdist_installs_with_and_without_a_compiler(dist: Path, tmp_path: Path, compiler: str, path: str) -> None:
    [sdist] = dist.glob("*.tar.gz")
    script = fresh_venv(tmp_path / "venv", str(sdist), env={"CC": compiler, "PIP_NO_CACHE_DIR": "1"})
    version = perfkit(script, "--version")
    assert version.returncode == 0 and f"(request path: {path})" in version.stdout, version.stdout + version.stderr
    assert perfkit(script, "mock", "--help").returncode == 0


@pytest.mark.litellm
def test_every_extra_beside_a_pinned_litellm_keeps_its_version(dist: Path) -> None:
    """pip's own answer, without installing: what ``perfkit[all]`` would change in a proxy's environment."""
    [wheel] = dist.glob("*.whl")
    python = litellm_python("1.83.14")
    resolved = subprocess.run(
        [str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", f"{wheel}[all]"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    changes = {
        item["metadata"]["name"].lower(): item["metadata"]["version"] for item in json.loads(resolved.stdout)["install"]
    }
    assert "litellm" not in changes, changes
    pinned = {"orjson", "starlette", "pyroscope-io", "uvicorn", "uvloop"}
    assert not pinned & set(changes), {name: changes[name] for name in pinned & set(changes)}
