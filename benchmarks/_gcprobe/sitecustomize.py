"""Loaded (via PYTHONPATH) by the proxies benchmarks/litellm_overhead.py starts,
plain and under perfkit alike: logs every garbage collection's end time
(CLOCK_MONOTONIC, shared by all processes), pause, generation and the objects
it freed, one line each, so the benchmark can tell the runs' collector pauses
apart from perfkit's cost. With ``PERFKIT_BENCH_GC_COUNT=1`` a full
collection also logs the oldest generation's size before and after it
(``gc.get_objects(2)``: tens of milliseconds on the proxy's heap, so only for
diagnosis): the objects promoted into it between two full collections, which
is what makes the next one come.
With ``PERFKIT_BENCH_GC_PROMOTED=1`` a generation-1 collection also logs the
objects it promoted into the oldest generation: the tracked objects of the two
young generations when it starts, less those it collected (``gc.get_objects``
of the young generations only: a few thousand objects). Promotions are what
brings the next full collection: CPython runs one once they pass a quarter of
the oldest generation's size. Tuples of atomic values that the collection
untracks instead are counted too, so the figure is a slight overcount.
With ``PERFKIT_BENCH_GC_TYPES=1`` (diagnosis too, and slower still) each full
collection also writes, to ``<log>-types.<pid>``, the types whose count in the
oldest generation grew most since the previous full collection ended: what
was promoted there in between (garbage and survivors alike).
With ``PERFKIT_BENCH_GC_YOUNG=1`` each generation-1 collection, as it starts,
writes to ``<log>-young.<pid>`` how many objects of each type the two young
generations hold: the objects alive then are what it promotes (a few
thousand, so cheap enough to run under load, though not free).
With ``PERFKIT_BENCH_CAPTURE=FILE``, in the export agent: the batches it reads, appended to FILE.PID.
Under ``perfkit run`` perfkit's own sitecustomize runs first and hands over here.
"""

import gc
import os
import time
from collections import Counter


def _types_of(*generations):
    """How many tracked objects of each type the generations hold."""
    return Counter(type(o).__module__ + "." + type(o).__qualname__ for g in generations for o in gc.get_objects(g))


def _type_line(counts):
    return f"{time.monotonic_ns()} " + " ".join(f"{name}={n}" for name, n in counts) + "\n"


_LOG = os.environ.get("PERFKIT_BENCH_GC_LOG")
if _LOG and os.environ.get("PERFKIT_ROLE") != "agent":
    _out = open(f"{_LOG}.{os.getpid()}", "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    _count = os.environ.get("PERFKIT_BENCH_GC_COUNT") == "1"
    _promoted = os.environ.get("PERFKIT_BENCH_GC_PROMOTED") == "1"
    _started = [0, -1]

    def _log_collection(phase, info):
        if phase == "start":
            if _count and info["generation"] == 2:
                _started[1] = len(gc.get_objects(2))
            elif _promoted and info["generation"] == 1:
                _started[1] = len(gc.get_objects(0)) + len(gc.get_objects(1))
            _started[0] = time.monotonic_ns()
        elif _started[0]:
            now = time.monotonic_ns()
            extra = ""
            if _count and info["generation"] == 2:
                extra = f" {_started[1]} {len(gc.get_objects(2))}"
            elif _promoted and info["generation"] == 1:
                extra = f" {_started[1] - info['collected']}"
            _out.write(f"{now} {now - _started[0]} {info['generation']} {info['collected']}{extra}\n")
            _started[0], _started[1] = 0, -1

    gc.callbacks.append(_log_collection)

    if os.environ.get("PERFKIT_BENCH_GC_TYPES") == "1":
        _types = open(f"{_LOG}-types.{os.getpid()}", "a", buffering=1)  # noqa: SIM115
        _after = [None]

        def _log_types(phase, info):
            if info["generation"] != 2:
                return
            if phase == "start":
                if _after[0] is not None:
                    _types.write(_type_line((_types_of(2) - _after[0]).most_common(40)))
            else:
                _after[0] = _types_of(2)

        gc.callbacks.append(_log_types)

    if os.environ.get("PERFKIT_BENCH_GC_YOUNG") == "1":
        _young = open(f"{_LOG}-young.{os.getpid()}", "a", buffering=1)  # noqa: SIM115

        def _log_young(phase, info):
            if phase == "start" and info["generation"] == 1:
                _young.write(_type_line(_types_of(0, 1).items()))

        gc.callbacks.append(_log_young)

# In the export agent, with PERFKIT_BENCH_CAPTURE=FILE: every batch frame it
# reads is appended to FILE (records as a served proxy made them, for
# benchmarks/agent_cost.py).
_CAPTURE = os.environ.get("PERFKIT_BENCH_CAPTURE")
if _CAPTURE and os.environ.get("PERFKIT_ROLE") == "agent":
    import importlib

    _frame_module = importlib.import_module("litellm_perfkit._export._frames")
    _layouts = importlib.import_module("litellm_perfkit._core._layouts")
    _read_batch = _frame_module.read_batch
    _frames = open(f"{_CAPTURE}.{os.getpid()}", "ab")  # noqa: SIM115 - lives as long as the process

    def _captured(payload):
        _frames.write(_layouts.FRAME_HEAD.pack(_layouts.FrameKind.BATCH, len(payload)) + payload)
        _frames.flush()
        return _read_batch(payload)

    _frame_module.read_batch = _captured
