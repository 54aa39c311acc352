"""The whole suite, as the README's test command and ``.ci/run`` run it:
``python -m tests [pytest options]``.

Two parts: every test but the quiet ones two files at a time (pytest-xdist),
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

PARTS: tuple[tuple[str, ...], ...] = (("-n", "2", "-m", "not quiet"), ("-m", "quiet"))


def run(options: Sequence[str]) -> int:
    status = 0
    for part in PARTS:
        child = subprocess.Popen([sys.executable, "-m", "pytest", *part, *options])

        def stop(signum: int, frame: FrameType | None, child: subprocess.Popen[bytes] = child) -> None:
            child.send_signal(signum)
            raise SystemExit(128 + signum)

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            code = child.wait()
        except KeyboardInterrupt:  # the terminal sent SIGINT to the part too
            child.wait()
            return 128 + signal.SIGINT
        except SystemExit:
            child.wait()
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)
        status = status or code
    return status


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
