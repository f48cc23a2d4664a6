"""More waits and holds for --why: a ring of three, a re-entered RLock, the library waits not
in why_waits.py, and a Condition held by a ``with`` block.

- "t1", "t2", "t3": a lock-order deadlock of three through ``with`` blocks on the Locks
  ``LA``, ``LB``, ``LC``: t1 holds LA and is entering ``with LB:``, t2 holds LB and is
  entering ``with LC:``, t3 holds LC and is entering ``with LA:``. A barrier between the two
  ``with``s of each makes all three hold their first lock before any tries its second.
- "reenter" takes the RLock ``RR`` three times (``with RR:``, ``with RR:`` in the same frame,
  then ``RR.acquire()``) and parks on the Event ``PARK_R`` inside both blocks; "rr_waiter"
  is blocked in ``RR.acquire()``. "reenter_nested" takes the RLock ``RR2`` in a ``with``
  block, then again in a ``with`` block of the function it calls, which also calls
  ``RR2.acquire()`` and parks on ``PARK_R``.
- "barrier" in ``B3.wait()`` on ``threading.Barrier(3)``, the only party waiting.
- "putter" in ``QF.put(1)`` on a full ``queue.Queue(maxsize=1)``.
- "futurer" in ``F.result()`` on a ``concurrent.futures.Future`` nothing completes.
- "condholder" holds the Condition ``C2`` (``with C2:``) and parks on the Event ``PARK_C``
  inside the block; "condenter" is blocked entering ``with C2:``.
- The main thread records the truth and waits on ``_truth.HELD``.

The truth has ``objects``: ``id()`` of each object waited on or held, and ``with_lines``: the
line of the ``with`` that took each held lock (the outermost on it), from the
``# <thread> takes`` markers below.
"""

import concurrent.futures
import os
import queue
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

LA = threading.Lock()
LB = threading.Lock()
LC = threading.Lock()
RING = threading.Barrier(3)
RR = threading.RLock()
RR2 = threading.RLock()
PARK_R = threading.Event()
REENTERED = threading.Event()
B3 = threading.Barrier(3)
QF = queue.Queue(maxsize=1)
F = concurrent.futures.Future()
C2 = threading.Condition()
PARK_C = threading.Event()
COND_HELD = threading.Event()


def t1(started):
    with LA:  # t1 takes LA
        RING.wait()
        started.set()
        with LB:
            pass


def t2(started):
    with LB:  # t2 takes LB
        RING.wait()
        started.set()
        with LC:
            pass


def t3(started):
    with LC:  # t3 takes LC
        RING.wait()
        started.set()
        with LA:
            pass


def reenter(started):
    with RR:  # reenter takes RR
        with RR:
            RR.acquire()
            REENTERED.set()
            started.set(); PARK_R.wait()  # noqa: E702


def reenter_inner(started):
    with RR2:
        RR2.acquire()
        started.set(); PARK_R.wait()  # noqa: E702


def reenter_nested(started):
    with RR2:  # reenter_nested takes RR2
        reenter_inner(started)


def rr_waiter(started):
    REENTERED.wait()
    started.set(); RR.acquire()  # noqa: E702


def barrier(started):
    started.set(); B3.wait()  # noqa: E702


def putter(started):
    started.set(); QF.put(1)  # noqa: E702


def futurer(started):
    started.set(); F.result()  # noqa: E702


def condholder(started):
    with C2:  # condholder takes C2
        COND_HELD.set()
        started.set(); PARK_C.wait()  # noqa: E702


def condenter(started):
    COND_HELD.wait()
    started.set()
    with C2:
        pass


# Started in this order: the report lists threads by age.
WORKERS = {"t1": t1, "t2": t2, "t3": t3, "reenter": reenter, "rr_waiter": rr_waiter,
           "reenter_nested": reenter_nested, "barrier": barrier, "putter": putter,
           "futurer": futurer, "condholder": condholder, "condenter": condenter}
# The `with` that took each thread's held lock (its outermost on that lock) is on the line of
# its marker: "# " then these words.
WITH_MARKERS = {"t1": "t1 takes LA", "t2": "t2 takes LB", "t3": "t3 takes LC",
                "reenter": "reenter takes RR", "reenter_nested": "reenter_nested takes RR2",
                "condholder": "condholder takes C2"}


def main():
    QF.put(0)
    _truth.start_threads(WORKERS)
    objects = {"LA": id(LA), "LB": id(LB), "LC": id(LC), "RR": id(RR), "RR2": id(RR2),
               "PARK_R": id(PARK_R), "B3": id(B3), "QF": id(QF), "F": id(F), "C2": id(C2),
               "PARK_C": id(PARK_C)}
    with_lines = {name: _truth.source_line_of("# " + marker, __file__)
                  for name, marker in WITH_MARKERS.items()}
    _truth.ready(objects=objects, with_lines=with_lines); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
