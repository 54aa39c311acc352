"""Loaded by every Python process started under ``perfkit run`` (via PYTHONPATH).

It installs perfkit's post-import hook, then hands over to any other
sitecustomize module that this one shadows.
"""

import os
import sys

try:  # constants only: cheap, and perfkit's package is on PYTHONPATH beside this directory
    from litellm_perfkit._wire._environment_variables import (
        PERFKIT_PROMETHEUS_DIR,
        PERFKIT_PROMETHEUS_HOST,
        PERFKIT_PROMETHEUS_PORT,
        PERFKIT_ROLE,
        PERFKIT_RUN,
        PERFKIT_RUN_PID,
    )
except Exception as exc:  # only perfkit run puts this module on the path: a broken perfkit must not stop the host
    sys.stderr.write(f"perfkit: bootstrap failed ({type(exc).__name__}: {exc}); running uninstrumented\n")
    PERFKIT_RUN = PERFKIT_RUN_PID = PERFKIT_ROLE = PERFKIT_PROMETHEUS_PORT = PERFKIT_PROMETHEUS_HOST = ""
    PERFKIT_PROMETHEUS_DIR = ""


def _perfkit_bootstrap() -> None:
    if not PERFKIT_RUN or os.environ.get(PERFKIT_RUN) != "1" or os.environ.get(PERFKIT_ROLE) == "agent":
        return
    try:
        from litellm_perfkit._litellm._autoload import install

        install()
    except Exception as exc:  # a broken perfkit must not stop the host from starting
        sys.stderr.write(f"perfkit: bootstrap failed ({type(exc).__name__}: {exc}); running uninstrumented\n")


def _prometheus() -> None:
    """In the process perfkit run became: serve /metrics over every worker's snapshots (perfkit run --prometheus-port)."""
    if not PERFKIT_RUN_PID or os.environ.get(PERFKIT_RUN_PID) != str(os.getpid()):
        return
    if not os.environ.get(PERFKIT_PROMETHEUS_PORT):
        return
    try:
        from litellm_perfkit._export._prometheus import serve_prometheus

        serve_prometheus(
            int(os.environ[PERFKIT_PROMETHEUS_PORT]), os.environ.get(PERFKIT_PROMETHEUS_HOST) or "127.0.0.1"
        )
    except Exception as exc:  # the proxy starts without it
        sys.stderr.write(
            f"perfkit: cannot serve Prometheus metrics ({type(exc).__name__}: {exc}); the proxy runs without them\n"
        )


def _hangup_stops() -> None:
    """In the process perfkit run became: SIGHUP (a closed terminal) stops it
    as SIGTERM does, gracefully, so the last spans are flushed, unless the
    command handles SIGHUP itself (uvicorn's multi-worker supervisor restarts
    its workers on it, and installs that handler later, over this one)."""
    if not PERFKIT_RUN_PID or os.environ.get(PERFKIT_RUN_PID) != str(os.getpid()):
        return
    import signal

    if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        signal.signal(signal.SIGHUP, lambda signum, frame: os.kill(os.getpid(), signal.SIGTERM))


def _health_line() -> None:
    """In the process perfkit run became: the health line over every worker when it exits."""
    if not PERFKIT_RUN_PID or os.environ.get(PERFKIT_RUN_PID) != str(os.getpid()):
        return
    directory = os.environ.get(PERFKIT_PROMETHEUS_DIR)
    if not directory:
        return
    import atexit

    def at_exit() -> None:
        try:
            from litellm_perfkit._export._health import print_health_once

            print_health_once(directory)
        except Exception:  # never a traceback at the host's exit
            pass

    atexit.register(at_exit)


def _reap_agents() -> None:
    """In the process perfkit run became: wait for the export agents of
    workers that were killed, which it adopts and would leave as zombies
    (litellm_perfkit/_export/_reaper.py)."""
    if not PERFKIT_RUN_PID or os.environ.get(PERFKIT_RUN_PID) != str(os.getpid()):
        return
    try:
        from litellm_perfkit._export._reaper import start_reaper

        start_reaper()
    except Exception as exc:  # the proxy starts without it
        sys.stderr.write(f"perfkit: cannot reap orphaned export agents ({type(exc).__name__}: {exc})\n")


def _chain() -> None:
    """Import the next sitecustomize on sys.path, if there is one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.modules.pop("sitecustomize", None)
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    if saved is not None:
        sys.modules["sitecustomize"] = saved


def _tidy_path() -> None:
    """Take perfkit's entries off sys.path once they have served (PYTHONPATH
    keeps them for the processes this one starts). A host that imports a
    missing module on every request searches every entry each time (LiteLLM
    1.103's auth tries its OTel plumbing per request), so each entry perfkit
    added cost CPU per request. This directory only held this module; the
    one above perfkit's package goes too when perfkit is installed where the
    host runs (its submodules load through the package's own path)."""
    here = os.path.dirname(os.path.abspath(__file__))
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    kept = [p for p in sys.path if os.path.abspath(p or ".") != here]
    without_parent = [p for p in kept if os.path.abspath(p or ".") != package_parent]
    if len(without_parent) < len(kept) and _installed_in(without_parent):
        kept = without_parent
    sys.path[:] = kept


def _installed_in(path: list[str]) -> bool:
    import importlib.metadata

    try:
        return any(
            (d.metadata["Name"] or "").lower().replace("_", "-") == "litellm-perfkit"
            for d in importlib.metadata.distributions(path=path)
        )
    except Exception:  # an unreadable distribution: keep the path as it was
        return False


_perfkit_bootstrap()
_prometheus()
_hangup_stops()
_reap_agents()
_health_line()
_chain()
_tidy_path()
