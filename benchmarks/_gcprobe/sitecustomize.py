"""Loaded (via PYTHONPATH) by the proxies benchmarks/litellm_overhead.py starts,
plain and under perfkit alike: logs every garbage collection's end time
(CLOCK_MONOTONIC, shared by all processes) and pause, one line each, so the
benchmark can tell the runs' collector pauses apart from perfkit's cost.
Under ``perfkit run`` perfkit's own sitecustomize runs first and hands over here.
"""

import gc
import os
import time

_LOG = os.environ.get("PERFKIT_BENCH_GC_LOG")
if _LOG and os.environ.get("PERFKIT_ROLE") != "agent":
    _out = open(f"{_LOG}.{os.getpid()}", "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    _started = [0]

    def _log_collection(phase, info):
        if phase == "start":
            _started[0] = time.monotonic_ns()
        elif _started[0]:
            now = time.monotonic_ns()
            _out.write(f"{now} {now - _started[0]} {info['generation']}\n")
            _started[0] = 0

    gc.callbacks.append(_log_collection)
