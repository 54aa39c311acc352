"""The real LiteLLM proxy from PyPI, started from its cached venv, on 127.0.0.1."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import httpx

from litellm_perfkit._bench import CONFIG_TEMPLATE
from tests.support.litellm_env import litellm_env, litellm_python
from tests.support.servers import free_port


@contextlib.contextmanager
def litellm_proxy(
    version: str,
    upstream: str,
    workdir: Path,
    *,
    mode: Literal["perfkit", "plain"] = "perfkit",
    workers: int = 1,
    perfkit_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    pin_cpu: str | None = None,
    pids: list[int] | None = None,
) -> Iterator[str]:
    """Yields the proxy's URL; ``pids`` (if given) receives its main process id."""
    python = litellm_python(version)
    bin_dir = python.parent
    config = workdir / f"proxy-{free_port()}.yaml"
    config.write_text(CONFIG_TEMPLATE.replace("{upstream}", upstream))
    port = free_port()
    command = [str(bin_dir / "litellm"), "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", str(workers)]
    if mode == "perfkit":
        command = [str(bin_dir / "perfkit"), "run", *perfkit_args, "--", *command]
    if pin_cpu is not None:
        command = ["taskset", "-c", pin_cpu, *command]
    log_path = workdir / f"proxy-{port}.log"
    log = log_path.open("wb")
    # faulthandler: a crash in the proxy leaves its Python stack in the log.
    process_env = {**litellm_env(), "PYTHONFAULTHANDLER": "1", **(env or {})}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=process_env, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    if pids is not None:
        pids.append(process.pid)  # perfkit run execs the proxy: same pid
    started = False
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the proxy exited:\n{log_path.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                # One worker answers health checks before the others have
                # imported LiteLLM; wait for each worker's own startup line.
                healthy = httpx.get(f"{url}/health/liveliness", timeout=1).status_code == 200
                if healthy and log_path.read_text(errors="replace").count("Application startup complete.") >= workers:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the proxy did not become healthy:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        started = True
        yield url
    finally:
        # Checked here, not after the yield, so that it is also said when the
        # test failed first (a refused connection is then the proxy's death).
        died = started and process.poll() is not None
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        if died:
            raise RuntimeError(f"the proxy died during the test ({exit_status(process.returncode)}):\n{log_path.read_text(errors='replace')[-3000:]}")


def exit_status(returncode: int) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def proxy_log(workdir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(workdir.glob("proxy-*.log")))
