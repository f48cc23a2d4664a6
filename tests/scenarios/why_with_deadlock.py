"""The classic lock-order deadlock through ``with`` blocks: each thread holds its first lock in
a ``with`` block and is blocked *entering* the ``with`` of the other's.

- "left" does ``with A:`` then ``with B:``; "right" does ``with B:`` then ``with A:`` (A and B
  are ``threading.Lock()``s).
- "rleft" and "rright" do the same with the RLocks ``R1`` and ``R2``.

A barrier between the two ``with``s makes each hold its first lock before it tries the
second; each sets ``started`` only once past the barrier. The main thread records the truth
and waits on ``_truth.HELD``.

The truth has ``objects``: ``id()`` of each lock, and ``with_lines``: the line of each
thread's first ``with`` (the one whose block holds its first lock), from the ``# <thread> takes``
markers below.
"""

import os
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

A = threading.Lock()
B = threading.Lock()
R1 = threading.RLock()
R2 = threading.RLock()
BOTH = threading.Barrier(2)
RBOTH = threading.Barrier(2)


def left(started):
    with A:  # left takes A
        BOTH.wait()
        started.set()
        with B:
            pass


def right(started):
    with B:  # right takes B
        BOTH.wait()
        started.set()
        with A:
            pass


def rleft(started):
    with R1:  # rleft takes R1
        RBOTH.wait()
        started.set()
        with R2:
            pass


def rright(started):
    with R2:  # rright takes R2
        RBOTH.wait()
        started.set()
        with R1:
            pass


# Started in this order: the report lists threads by age.
WORKERS = {"left": left, "right": right, "rleft": rleft, "rright": rright}
# Each thread's first `with` is on the line of its marker: "# " then these words.
WITH_MARKERS = {"left": "left takes A", "right": "right takes B", "rleft": "rleft takes R1",
                "rright": "rright takes R2"}


def main():
    _truth.start_threads(WORKERS)
    objects = {"A": id(A), "B": id(B), "R1": id(R1), "R2": id(R2)}
    with_lines = {name: _truth.source_line_of("# " + marker, __file__)
                  for name, marker in WITH_MARKERS.items()}
    _truth.ready(objects=objects, with_lines=with_lines); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
