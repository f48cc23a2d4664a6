"""Main thread and three workers, each stopped in a different function at a different depth.

Every thread waits in ``_truth.HELD.acquire()``. A worker sets its Event on the same line
as its wait, so the line recorded is the line it blocks on; ``_truth.ready()`` then samples
the workers until their stacks are stable.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402



def alpha(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


def bravo_inner(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


def bravo(started):
    bravo_inner(started)


def charlie_step(started, n):
    if n == 0:
        started.set(); _truth.HELD.acquire()  # noqa: E702
    charlie_step(started, n - 1)


def charlie(started):
    charlie_step(started, 4)


WORKERS = {"worker-a": alpha, "worker-b": bravo, "worker-c": charlie}


def wait_for_workers():
    _truth.start_threads(WORKERS)
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702


def main():
    wait_for_workers()


if __name__ == "__main__":
    main()
