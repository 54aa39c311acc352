"""The HTTP clients' waits (_litellm/_transport.py) left suspended and collected as garbage."""

from __future__ import annotations

import pytest

from tests.support import backends

# A wait left suspended (its task abandoned) and closed by the collector runs
# its ``finally`` inside whichever ContextVar.set started the collection: a
# ContextVar reset there crashes CPython 3.10 and 3.11 (SIGSEGV, gh-148891;
# see _core/_collector.py). _llm_call did so within its first rounds.
CRASH = (
    backends.SUSPENDED_SETUP
    + """
from litellm_perfkit._litellm import _transport

async def send(*args, **kwargs):
    await Never()

outbound = _transport.outbound(send)
waits = {
    "llm_call": lambda timeline: _transport._llm_call(Never(), timeline),
    "timed_wait": lambda timeline: _transport._timed_wait(Never(), timeline),
    "outbound": lambda timeline: outbound(),
}
make = waits[sys.argv[1]]
for n in range(3000):
    if n % 500 == 0:  # where a collection starts decides whether it crashes: several thresholds
        gc.set_threshold((7, 50, 101, 13, 77, 29)[n // 500], 1, 1)
    suspended_garbage(make)
    for var in others:
        var.set(n)
print("survived")
"""
)


@pytest.mark.parametrize("wait", ["llm_call", "timed_wait", "outbound"])
@pytest.mark.parametrize("name", backends.NAMES)
def test_a_wait_collected_as_garbage_does_not_crash_the_process(wait: str, name: str) -> None:
    backends.assert_survives(CRASH, name, wait)


# A host's finalizer that sets a ContextVar, run by a collection that starts
# inside the waits' own ContextVar.set (gh-148891 again): the waits set and
# reset theirs with the collector off. This died in 5 of 5 runs on each
# backend before.
FINALIZER_SETS = (
    backends.FINALIZER_SETUP
    + """
from litellm_perfkit._litellm import _transport

class Ready:
    def __await__(self):
        return iter(())

for n in range(6000):
    if n % 500 == 0:
        gc.set_threshold((7, 50, 101, 13, 77, 29)[n // 500 % 6], 1, 1)
    for _ in range(3):
        Garbage()
    try:
        _transport._timed_wait(Ready(), timeline).send(None)
    except StopIteration:
        pass
print("survived")
"""
)


@pytest.mark.parametrize("name", backends.NAMES)
def test_a_hosts_finalizer_that_sets_a_contextvar_does_not_crash_a_wait(name: str) -> None:
    backends.assert_survives(FINALIZER_SETS, name)
