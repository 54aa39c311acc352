"""The real LiteLLM proxy from PyPI, from its cached venv, on 127.0.0.1 (the product's launcher)."""

from __future__ import annotations

import contextlib
import resource
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from litellm_perfkit._bench import CONFIG_TEMPLATE
from litellm_perfkit._bench._launch import Children, LiteLLMProxy, ProxyMode, start_litellm
from tests.support.litellm_env import litellm_python

if TYPE_CHECKING:
    from typing_extensions import Unpack


class StartOptions(TypedDict, total=False):
    """``start_litellm``'s options that tests pass through as they are."""

    mode: ProxyMode
    workers: int
    perfkit_args: tuple[str, ...]
    env: dict[str, str] | None
    pin_cpu: str | None
    host: str
    timeout_s: float


class ProxyOptions(StartOptions, total=False):
    """How the proxy is started: ``start_litellm``'s options, and ``config``, a LiteLLM
    config with ``{upstream}`` for the mock's URL (CONFIG_TEMPLATE unless given)."""

    config: str
    litellm_args: tuple[str, ...]


@contextlib.contextmanager
def launched_proxy(
    version: str,
    upstream: str | None,
    workdir: Path,
    *,
    config: str = CONFIG_TEMPLATE,
    litellm_args: tuple[str, ...] = (),
    **options: Unpack[StartOptions],
) -> Iterator[LiteLLMProxy]:
    """The proxy, started and answering; stopped, with all it started, when the block ends.
    For a test that stops or signals it itself; other tests take ``litellm_proxy``.
    ``upstream`` None: the config names its upstreams itself."""
    bin_dir = litellm_python(version).parent
    workers = options.get("workers", 1)
    litellm, litellm_args = _patient(bin_dir, workers, litellm_args, workdir)
    with Children() as children:
        with _core_dumps():  # the proxy's processes inherit it; pytest keeps its own limit
            proxy = start_litellm(
                children,
                litellm,
                bin_dir / "perfkit",
                config if upstream is None else config.replace("{upstream}", upstream),
                workdir,
                litellm_args=litellm_args,
                **options,
            )
        yield proxy


@contextlib.contextmanager
def _core_dumps() -> Iterator[None]:
    """Processes started in the block dump core when they crash (in their working
    directory, the proxy's workdir, under the kernel's pattern ``core``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def _native_backtrace(python: Path, workdir: Path) -> str:
    """The crashed thread's C frames, from the core it left, by gdb: faulthandler
    names Python frames only."""
    cores = sorted(workdir.glob("core*"), key=lambda p: p.stat().st_mtime)
    if not cores:
        return "no core file in the proxy's directory (see /proc/sys/kernel/core_pattern)"
    gdb = shutil.which("gdb")
    if gdb is None:
        return f"gdb is not installed: the core is {cores[-1]}"
    try:
        result = subprocess.run(
            [gdb, "-batch", "-nx", "-ex", "bt 20", str(python), str(cores[-1])],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        for core in cores:  # hundreds of MB each
            core.unlink()
    frames = [line[:240] for line in result.stdout.splitlines() if line.startswith("#")]
    return "\n".join(["the crashed thread's C frames (gdb):", *frames]) if frames else result.stderr[-2000:]


@contextlib.contextmanager
def litellm_proxy(
    version: str, upstream: str, workdir: Path, *, pids: list[int] | None = None, **options: Unpack[ProxyOptions]
) -> Iterator[str]:
    """Yields the proxy's URL; ``pids`` (if given) receives its main process id.
    A proxy that died during the test fails it, with the end of its log."""
    with launched_proxy(version, upstream, workdir, **options) as proxy:
        if pids is not None:
            pids.append(proxy.pid)
        log = Path(proxy.child.log.name)
        try:
            yield proxy.url
        finally:
            # Checked here, not after the yield, so that it is also said when the
            # test failed first (a refused connection is then the proxy's death).
            died = proxy.child.died()
            if died:
                native = _native_backtrace(litellm_python(version), workdir) if "SIG" in died else ""
                raise RuntimeError(f"the proxy died during the test ({died}):\n{_log_end(log)}\n{native}")


def _log_end(log: Path) -> str:
    """The log's end; after a crash, faulthandler's first line and the crashing
    thread's frames (innermost first) ahead of it: the dump lists every thread,
    the crashing one among them, and a proxy has a dozen."""
    text = log.read_text(errors="replace")
    fatal = text.find("Fatal Python error")
    if fatal < 0:
        return text[-3000:]
    first_line = text[fatal:].split("\n", 1)[0]
    current = text.find("Current thread", fatal)
    crashed = text[current:].split("\n\n", 1)[0][:4000] if current >= 0 else "(no current thread named)"
    return f"{first_line}\n{crashed}\n...\n{text[-3000:]}"


# The release's own script, but for what a spawned worker runs before it can answer the
# supervisor's ping (below): LiteLLM is imported when __main__ runs, not when a worker
# re-imports this file as its __mp_main__.
_PATIENT_LAUNCHER = """#!{python}
# Written by tests/support/proxy.py: the litellm script, with uvicorn's worker health check
# waiting {seconds} s instead of 5 (uvicorn {uvicorn} has no option for it).
import sys

if __name__ == "__main__":
    from uvicorn.supervisors import multiprocess

    multiprocess.Process.is_alive.__defaults__ = ({seconds},)
    from litellm import run_server

    sys.exit(run_server())
"""
PATIENCE_S = 120
"""How long uvicorn's supervisor waits for a worker's answer to its ping, in the tests' 2-worker proxies."""


def _patient(bin_dir: Path, workers: int, litellm_args: tuple[str, ...], workdir: Path) -> tuple[Path, tuple[str, ...]]:
    """The proxy's script and arguments. Several workers: uvicorn's supervisor (0.30 on)
    pings each worker every half second and kills one that has not answered in 5 s; a
    worker importing LiteLLM on a busy 2-core machine takes longer, so it restarts them
    for minutes. The tests give it two minutes: ``--timeout_worker_healthcheck 120`` where
    the release's CLI has it (1.103.0), else a copy of the ``litellm`` script that sets the
    supervisor's ping timeout to 120 s before it runs (1.83.14, uvicorn 0.33). That copy
    also keeps LiteLLM's import out of a worker's start-up: the release's script imports
    LiteLLM at its top, which a spawned worker runs (as its ``__mp_main__``) before it
    starts the thread that answers the pings. The proxy is the release's either way, with
    and without perfkit alike."""
    script = bin_dir / "litellm"
    if workers < 2 or "--timeout_worker_healthcheck" in litellm_args:
        return script, litellm_args
    site = next(bin_dir.parent.glob("lib/python*/site-packages"), None)
    cli = None if site is None else site / "litellm" / "proxy" / "proxy_cli.py"
    if cli is None or not cli.is_file():
        return script, litellm_args
    if "--timeout_worker_healthcheck" in cli.read_text():
        return script, (*litellm_args, "--timeout_worker_healthcheck", str(PATIENCE_S))
    uvicorn = next(site.glob("uvicorn-*.dist-info"), None)
    patient = workdir / "litellm-patient"
    patient.write_text(
        _PATIENT_LAUNCHER.format(
            python=bin_dir / "python",
            seconds=PATIENCE_S,
            uvicorn=uvicorn.name.split("-")[1].removesuffix(".dist-info") if uvicorn else "?",
        )
    )
    patient.chmod(0o755)
    return patient, litellm_args


def proxy_log(workdir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(workdir.glob("proxy-*.log")))
