"""A Lock released by one thread and taken by another between two stops.

- Stop 1: "first" holds the Lock ``H`` in a ``with`` block and parks on the Event ``GO``
  inside it; "second" is blocked entering ``with H:``.
- The harness sends SIGUSR1 (blocked in every thread, taken by the main thread's
  ``sigwait``); the main thread sets ``GO``.
- Stop 2: "first" has left its ``with`` block and parks on the Event ``AFTER``; "second" has
  taken ``H`` and parks on the Event ``INSIDE`` inside its ``with H:`` block.

At each stop the main thread records the truth and signals ready (``stop``: 1, then 2), then
blocks: in ``sigwait`` at stop 1, on ``_truth.HELD`` at stop 2.

The truth has ``objects``: ``id()`` of ``H``, ``GO``, ``AFTER`` and ``INSIDE``, and
``with_lines``: the line of each thread's ``with H:``, from the ``# <thread> takes H`` markers
below.
"""

import os
import signal
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

H = threading.Lock()
GO = threading.Event()
AFTER = threading.Event()
INSIDE = threading.Event()
FIRST_IN = threading.Event()
FIRST_OUT = threading.Event()
SECOND_IN = threading.Event()
MAX_HANDOVER_SECONDS = 10.0


def first(started):
    with H:  # first takes H
        FIRST_IN.set()
        started.set(); GO.wait()  # noqa: E702
    FIRST_OUT.set(); AFTER.wait()  # noqa: E702


def second(started):
    FIRST_IN.wait()
    started.set()
    with H:  # second takes H
        SECOND_IN.set(); INSIDE.wait()  # noqa: E702


# Started in this order: the report lists threads by age.
WORKERS = {"first": first, "second": second}
# Each thread's `with H:` is on the line of its marker: "# " then these words.
WITH_MARKERS = {"first": "first takes H", "second": "second takes H"}


def main():
    # Every thread inherits the mask: SIGUSR1 stays pending until the main thread's sigwait.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    _truth.start_threads(WORKERS)
    objects = {"H": id(H), "GO": id(GO), "AFTER": id(AFTER), "INSIDE": id(INSIDE)}
    with_lines = {name: _truth.source_line_of("# " + marker, __file__)
                  for name, marker in WITH_MARKERS.items()}
    truth = dict(objects=objects, with_lines=with_lines)
    _truth.ready(stop=1, **truth); signal.sigwait({signal.SIGUSR1})  # noqa: E702
    GO.set()
    for done in (FIRST_OUT, SECOND_IN):
        if not done.wait(MAX_HANDOVER_SECONDS):
            _truth.fail("no hand-over within %.0f s" % MAX_HANDOVER_SECONDS)
    _truth.ready(stop=2, **truth); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
