"""Profiles beside the timings (docs/profiling.md).

    from litellm_perfkit.profiling import RequestProfileMiddleware, StageProfiler

    app = RequestProfileMiddleware(app, secret=os.environ["PERFKIT_PROFILE_SECRET"])  # x-perfkit-profile: <secret>
    with StageProfiler() as profiler:   # on the main thread, around the event loop
        ...
    profiler.write("profiles/")         # one flamegraph per stage

Flamegraphs of a whole process: ``perfkit flamegraph --pid PID`` (py-spy).
"""

from __future__ import annotations

from ._profile import RequestProfileMiddleware, StageProfiler

__all__ = ["RequestProfileMiddleware", "StageProfiler"]
