"""The real LiteLLM proxy from PyPI, from its cached venv, on 127.0.0.1 (the product's launcher)."""

from __future__ import annotations

import contextlib
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
    litellm_args = _patient(bin_dir, workers, litellm_args)
    with Children() as children:
        yield start_litellm(
            children,
            bin_dir / "litellm",
            bin_dir / "perfkit",
            config if upstream is None else config.replace("{upstream}", upstream),
            workdir,
            litellm_args=litellm_args,
            **options,
        )


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
                raise RuntimeError(
                    f"the proxy died during the test ({died}):\n{log.read_text(errors='replace')[-3000:]}"
                )


def _patient(bin_dir: Path, workers: int, litellm_args: tuple[str, ...]) -> tuple[str, ...]:
    """Several workers: uvicorn kills one that has not answered its health check
    in 5 s, and a worker importing LiteLLM on a busy 2-core machine takes longer,
    so it restarts them forever. The tests give it two minutes, where the
    release's CLI has the option (1.103.0 has it, 1.83.14 not)."""
    if workers < 2 or "--timeout_worker_healthcheck" in litellm_args:
        return litellm_args
    cli = next(bin_dir.parent.glob("lib/python*/site-packages/litellm/proxy/proxy_cli.py"), None)
    if cli is None or "--timeout_worker_healthcheck" not in cli.read_text():
        return litellm_args
    return (*litellm_args, "--timeout_worker_healthcheck", "120")


def proxy_log(workdir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(workdir.glob("proxy-*.log")))
