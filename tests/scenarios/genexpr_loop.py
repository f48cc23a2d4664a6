"""A thread that sums a generator expression in a loop: its generator's frame runs and yields
thousands of times a millisecond, linked to its caller while it runs and unlinked at each
yield, so a live read that finds the thread's current frame to be the generator's often
finds, a moment later, that frame unlinked. The main thread records the truth and blocks in
``_truth.HELD.acquire()``.

The truth has the threads and ``lines``: ``work``'s first line, the line of its sum (the
generator expression's line too), and ``loop``'s ``while`` and its call to ``work``.
"""

import os
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def work():  # work-def
    return sum(i * i for i in range(1000))  # sum-line


def loop(started):
    started.set()
    while True:  # loop-while
        work()  # call-line


def record(caller):
    here = os.path.abspath(__file__)
    by_name = {t.name: t for t in threading.enumerate()}
    return _truth.header(
        running=True,
        threads=[_truth._thread_entry(threading.current_thread(), _truth.frames_from(caller)),
                 _truth._thread_entry(by_name["summer"], [])],
        lines={m: _truth.source_line_of("# " + m, here)
               for m in ("work-def", "sum-line", "loop-while", "call-line")})


def main():
    _truth.start_threads({"summer": loop})
    _truth.write_truth(record(sys._getframe(0))); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
