"""What the bench reads of the processes it starts."""

from __future__ import annotations

import subprocess
import sys
import time

from litellm_perfkit._bench._launch import tree_usage

BURN = """
import threading, time
def burn(seconds):
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass
worker = threading.Thread(target=burn, args=(0.0137,))
worker.start(); worker.join()
print("ready", flush=True)
time.sleep(30)
"""


def test_cpu_of_a_process_to_well_under_a_tick_with_its_ended_threads() -> None:
    # /proc/PID/stat counts 10 ms ticks: an export agent's few milliseconds in a short run read as 0 or 10.
    child = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        cpu_s, rss_mib = tree_usage(child.pid)
        time.sleep(0.2)
        idle_s, _ = tree_usage(child.pid)
        assert 0.0137 <= cpu_s < 1.0 and rss_mib > 1  # the ended thread's burn, and the interpreter's start
        assert abs(cpu_s * 100 - round(cpu_s * 100)) > 1e-6  # not a whole number of ticks
        assert 0 <= idle_s - cpu_s < 0.005  # it sleeps
    finally:
        child.kill()
        child.wait()
