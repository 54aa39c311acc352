"""The whole suite, as the README's test command and ``.ci/run`` run it:
``python -m tests [pytest options]``.

Two parts: every test but the quiet ones three files at a time (pytest-xdist),
then the tests marked ``quiet`` alone (a measured time or CPU held to a bound
that a test beside them would move). The second part runs whatever the
first's outcome, so one run reports every failure; the exit status is the
first part's when it failed, else the second's. Ctrl-C or SIGTERM stops the
running part and runs no other.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType

# Three files at a time on 2 cores: the first part's tests wait on proxies, loads and timeouts
# for much of their time, and two at a time left part of the cores idle (README).
PARTS: tuple[tuple[str, ...], ...] = (("-n", "3", "-m", "not quiet"), ("-m", "quiet"))


def run(options: Sequence[str]) -> int:
    status = 0
    stopped_by: list[int] = []
    for part in PARTS:
        child = subprocess.Popen([sys.executable, "-m", "pytest", *part, *options])

        def stop(signum: int, frame: FrameType | None, child: subprocess.Popen[bytes] = child) -> None:
            stopped_by.append(signum)
            child.send_signal(signum)

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            code = child.wait()
        except KeyboardInterrupt:  # the terminal sent SIGINT to the part too
            stopped_by.append(signal.SIGINT)
            child.wait()
        finally:
            signal.signal(signal.SIGTERM, previous)
        if stopped_by:
            return 128 + stopped_by[0]
        status = status or code
    return status


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
