"""Benchmarks of perfkit's cost and of its tools (docs/overhead.md).

They measure recording itself, so every request is recorded unless a mode
says otherwise: ``PERFKIT_RECORD_RATE`` (default 10 a second, docs/configuration.md)
is ``all`` here, for this process and every proxy it starts.
"""

import os

os.environ.setdefault("PERFKIT_RECORD_RATE", "all")
