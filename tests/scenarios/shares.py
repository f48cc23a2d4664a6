"""A thread whose CPU shares are known, for `record` (issue 52): "worker" spends 3 units of
every 4 in ``three`` and 1 in ``one``, each spinning on the clock on one line (75% and 25% of
its samples). The clock is the thread's own CPU time: a thread kept off the CPU in ``three``
past the round's end would otherwise skip ``one``. A unit is drawn at random about a millisecond for each round, so that a sampler's
steady ticks do not keep meeting the same phase of the round (a fixed 4 ms round sampled every
10 ms would be seen at two phases only). The main thread records the truth and blocks in ``_truth.HELD.acquire()`` (idle:
left out of a profile without ``--idle``).

The truth has the threads (the main one's frames; the worker's frames below ``worker``, taken
while it runs, and its name and native_id) and ``places``: the (function, line) of the spin in
``three`` and ``one``, and of ``worker``'s calls to them.
"""

import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

UNIT_SECONDS = 0.001


def three(end):
    while time.thread_time() < end: pass  # spin-three  # noqa: E701


def one(end):
    while time.thread_time() < end: pass  # spin-one  # noqa: E701


def worker(started):
    started.set()
    while True:
        unit = UNIT_SECONDS * random.uniform(0.5, 1.5)
        t = time.thread_time()
        three(t + 3 * unit)  # call-three
        one(t + 4 * unit)  # call-one


def outer_frames():
    """The worker's frames outside ``worker`` (threading's), innermost first."""
    ident = next(t.ident for t in threading.enumerate() if t.name == "worker")
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while True:
        frames = _truth.frames_from(sys._current_frames()[ident])
        names = [f["function"] for f in frames]
        if "worker" in names:
            return frames[names.index("worker") + 1:]
        if time.monotonic() > deadline:
            _truth.fail("worker never ran")
        time.sleep(0.005)


def record(caller):
    here = os.path.abspath(__file__)
    worker_thread = next(t for t in threading.enumerate() if t.name == "worker")
    return _truth.header(
        running=True,
        threads=[_truth._thread_entry(threading.current_thread(), _truth.frames_from(caller)),
                 _truth._thread_entry(worker_thread, outer_frames())],
        places={name: _truth.source_line_of("# " + name, here)
                for name in ("spin-three", "spin-one", "call-three", "call-one")})


def main():
    _truth.start_threads({"worker": worker})
    _truth.write_truth(record(sys._getframe(0))); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
