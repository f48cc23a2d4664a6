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

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def work():  # work-def
    return sum(i * i for i in range(1000))  # sum-line


def loop(started):
    started.set()
    while True:  # loop-while
        work()  # call-line


def main():
    here = os.path.abspath(__file__)
    _truth.running_beside("summer", loop, lines={
        m: _truth.source_line_of("# " + m, here)
        for m in ("work-def", "sum-line", "loop-while", "call-line")})


if __name__ == "__main__":
    main()
