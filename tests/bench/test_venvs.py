"""The per-version LiteLLM venvs: what the install check sees."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from litellm_perfkit._bench import _venvs
from litellm_perfkit._bench._launch import Child, Children, ChildrenClosed
from litellm_perfkit._bench._venvs import PACKAGE_ROOT, installed, litellm_python
from litellm_perfkit._stop import Stopped, stop_signals


def test_an_empty_venv_has_no_perfkit_even_when_checked_from_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run from the checkout, ``python -c`` would find litellm_perfkit in the
    # working directory and the venv would never get perfkit installed.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    monkeypatch.chdir(PACKAGE_ROOT)
    assert installed(tmp_path / "venv" / "bin" / "python") == (None, False)


def test_this_environment_has_perfkit_from_this_checkout_and_pyinstrument() -> None:
    assert installed(Path(sys.executable)) == (PACKAGE_ROOT, True)


def test_two_threads_asking_for_one_venv_install_perfkit_into_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bench starts its proxies in threads; two pips in one venv removed each other's bin/perfkit.
    monkeypatch.setattr(_venvs, "CACHE", tmp_path)
    (tmp_path / "venvs" / f"litellm-1.0.0-py{sys.version_info.major}.{sys.version_info.minor}").mkdir(parents=True)
    (next((tmp_path / "venvs").iterdir()) / ".complete").write_text("1.0.0")
    has_perfkit, inside, most_inside, second_came = [False], [0], [0], threading.Event()
    monkeypatch.setattr(_venvs, "installed", lambda python: (PACKAGE_ROOT if has_perfkit[0] else None, True))

    def pip(children: Children, python: Path, venv: Path, what: str, *args: str) -> None:
        inside[0] += 1
        most_inside[0] = max(most_inside[0], inside[0])
        if inside[0] == 2:
            second_came.set()
        second_came.wait(0.5)  # without the lock the other thread arrives here meanwhile
        has_perfkit[0] = True
        inside[0] -= 1

    monkeypatch.setattr(_venvs, "_pip", pip)
    threads = [threading.Thread(target=litellm_python, args=("1.0.0",)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most_inside[0] == 1 and has_perfkit[0]


def _pip_that_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A built venv without perfkit (this interpreter's), whose pip sleeps for a minute."""
    monkeypatch.setattr(_venvs, "CACHE", tmp_path)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    venv = tmp_path / "venvs" / f"litellm-1.0.0-py{version[6:]}"
    interpreter = Path(sys.executable).resolve()
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(interpreter)
    (venv / "pyvenv.cfg").write_text(f"home = {interpreter.parent}\ninclude-system-site-packages = false\n")
    pip = venv / "lib" / version / "site-packages" / "pip"
    pip.mkdir(parents=True)
    (pip / "__init__.py").write_text("")
    (pip / "__main__.py").write_text("import time\ntime.sleep(60)\n")
    (venv / ".complete").write_text("1.0.0")
    monkeypatch.setattr(_venvs, "installed", lambda python: (None, True))


def _pip_child(children: Children) -> Child:
    deadline = time.monotonic() + 10
    while not children.children:
        assert time.monotonic() < deadline, "pip did not start"
        time.sleep(0.02)
    [child] = children.children
    assert child.name == "pip-perfkit"
    return child


def test_a_venv_install_in_a_start_thread_is_stopped_with_the_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bench starts its proxies in threads: its stop waited for their pips, or left them running.
    _pip_that_hangs(tmp_path, monkeypatch)
    outcome: list[BaseException] = []

    def install() -> None:
        try:
            litellm_python("1.0.0", None, children)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=install, daemon=True)
    with Children() as children:
        thread.start()
        pip = _pip_child(children).process
        stopping = time.monotonic()
    assert pip.returncode == -signal.SIGTERM and time.monotonic() - stopping < 2
    thread.join(5)
    assert [type(e) for e in outcome] == [ChildrenClosed]
    # A start that waited for the venv's lock meanwhile says nothing of installing.
    said: list[str] = []
    with pytest.raises(ChildrenClosed, match="not installed"):
        litellm_python("1.0.0", said.append, children)
    assert said == []


def test_a_stop_signal_during_a_venv_install_stops_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pip_that_hangs(tmp_path, monkeypatch)
    main = threading.get_ident()
    pips: list[Child] = []

    def signal_when_pip_runs() -> None:
        pips.append(_pip_child(children))
        signal.pthread_kill(main, signal.SIGTERM)

    with Children() as children, stop_signals(), pytest.raises(Stopped):
        threading.Thread(target=signal_when_pip_runs, daemon=True).start()
        litellm_python("1.0.0", None, children)
    assert pips[0].process.returncode == -signal.SIGTERM
    assert children.children == []
