"""Profiles: py-spy flamegraphs, per-request pyinstrument profiles, per-stage
sampling, pyroscope. Nothing here runs unless it is asked for."""

from __future__ import annotations

from ._flamegraph import FlamegraphOptions, ProfileError, record, start_recording, stop_recording
from ._request import RequestProfileMiddleware
from ._stages import StageProfiler

__all__ = [
    "FlamegraphOptions",
    "ProfileError",
    "RequestProfileMiddleware",
    "StageProfiler",
    "record",
    "start_recording",
    "stop_recording",
]
