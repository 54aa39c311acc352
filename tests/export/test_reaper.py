"""An adopted export agent that exited is reaped; no other child is touched."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from litellm_perfkit._export._reaper import AGENT_COMM

# Run in a process of its own: it makes itself a subreaper, as a multi-worker
# LiteLLM supervisor does, so the orphaned "agent" is adopted by it.
SCRIPT = textwrap.dedent(
    """
    import ctypes, os, subprocess, sys, time
    from litellm_perfkit._export import _reaper
    assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    agent = (
        "from litellm_perfkit._export._reaper import name_agent; import time; name_agent(); time.sleep(0.5)"
    )
    # A "worker" that starts an agent and dies at once: the agent is adopted here.
    worker = f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {agent!r}]); print(p.pid)"
    orphan = int(subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True).stdout)
    own = subprocess.Popen([sys.executable, "-c", "pass"])  # a child of ours that exits: not to be taken
    mine = subprocess.Popen([sys.executable, "-c", agent.replace("0.5", "0")])  # an agent this process started
    _reaper.OWN_AGENTS.add(mine.pid)
    deadline = time.monotonic() + 20
    reaped = []
    while not reaped and time.monotonic() < deadline:
        time.sleep(0.2)
        reaped = _reaper.reap_orphaned_agents()
    print(reaped == [orphan], os.path.exists(f"/proc/{orphan}"), own.wait(), mine.wait())
    """
)


def test_an_adopted_agent_that_exited_is_reaped_and_nothing_else() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    # Reaped (gone from /proc); the other children still had their exit status for their own wait().
    assert result.stdout.split() == ["True", "False", "0", "0"], result.stdout + result.stderr[-2000:]


def test_the_agent_is_named_so_that_a_zombie_keeps_the_name() -> None:
    script = (
        "from litellm_perfkit._export._reaper import name_agent; name_agent(); print(open('/proc/self/comm').read())"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True)
    assert result.stdout.strip() == AGENT_COMM
