"""Threads blocked in each kind of wait --why names, and a lock-order deadlock.

- "poster" holds Lock ``L1`` in a ``with`` block and waits for RLock ``R``; "rotator" took
  ``R`` with ``R.acquire()`` and waits for ``L1``: a deadlock of two threads.
- "plain" waits for ``PLAIN``, a Lock the main thread took with ``acquire()`` (no trace of
  its holder).
- "eventer" in ``EV.wait()``, "getter" in ``Q.get()``, "conder" in ``C.wait()``,
  "semaphorer" in ``S.acquire()``, "simpleq" in ``SQ.get()``; "mpeventer" in
  ``MP_EV.wait()`` and "mpbarrier" in ``MP_BAR.wait()``, a ``multiprocessing`` Event and Barrier
  (of the fork context: their semaphores are unlinked at once, no resource tracker is started).
- The main thread records the truth and joins "poster".

The truth has ``objects``: ``id()`` of each object waited on, and ``poster_with_line``: the
line of poster's ``with L1:``.
"""

import multiprocessing
import os
import queue
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

L1 = threading.Lock()
R = threading.RLock()
PLAIN = threading.Lock()
EV = threading.Event()
Q = queue.Queue()
C = threading.Condition()
S = threading.Semaphore(0)
SQ = queue.SimpleQueue()
MP_EV = multiprocessing.get_context("fork").Event()
# Two parties, one waiter: it waits for ever.
MP_BAR = multiprocessing.get_context("fork").Barrier(2)
POSTER_HAS = threading.Event()
ROTATOR_HAS = threading.Event()


def poster(started):
    with L1:  # poster takes L1
        POSTER_HAS.set()
        ROTATOR_HAS.wait()
        started.set(); R.acquire()  # noqa: E702


def rotator(started):
    R.acquire()
    ROTATOR_HAS.set()
    POSTER_HAS.wait()
    started.set(); L1.acquire()  # noqa: E702


def plain(started):
    started.set(); PLAIN.acquire()  # noqa: E702


def eventer(started):
    started.set(); EV.wait()  # noqa: E702


def getter(started):
    started.set(); Q.get()  # noqa: E702


def conder(started):
    with C:
        started.set(); C.wait()  # noqa: E702


def semaphorer(started):
    started.set(); S.acquire()  # noqa: E702


def simpleq(started):
    started.set(); SQ.get()  # noqa: E702


def mpeventer(started):
    started.set(); MP_EV.wait()  # noqa: E702


def mpbarrier(started):
    started.set(); MP_BAR.wait()  # noqa: E702


# Started in this order: the report lists threads by age, so poster before rotator.
WORKERS = {"poster": poster, "rotator": rotator, "plain": plain, "eventer": eventer,
           "getter": getter, "conder": conder, "semaphorer": semaphorer, "simpleq": simpleq,
           "mpeventer": mpeventer, "mpbarrier": mpbarrier}


def main():
    PLAIN.acquire()
    _truth.start_threads(WORKERS)
    by_name = {t.name: t for t in threading.enumerate()}
    poster_thread = by_name["poster"]
    objects = {"L1": id(L1), "R": id(R), "PLAIN": id(PLAIN), "EV": id(EV), "Q": id(Q),
               "C": id(C), "S": id(S), "SQ": id(SQ), "MP_EV": id(MP_EV), "MP_BAR": id(MP_BAR),
               "poster": id(poster_thread)}
    with_line = _truth.source_line_of("# poster " + "takes L1", __file__)
    _truth.ready(objects=objects, poster_with_line=with_line); poster_thread.join()  # noqa: E702


if __name__ == "__main__":
    main()
