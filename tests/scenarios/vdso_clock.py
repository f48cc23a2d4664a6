"""A thread that asks for its CPU time in a loop (``time.thread_time()``, issue 52's shares.py
does the same): the C library calls the vDSO's ``clock_gettime``, and the kernel's
thread-CPU clock is a system call made from inside the vDSO, so a thread stopped by a
debugger or ``gcore`` is nearly always stopped there, in code of no file. The main thread
records the truth and blocks in ``_truth.HELD.acquire()``.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def clock(started):
    started.set()
    while True:
        time.thread_time()  # clock-line


def main():
    here = os.path.abspath(__file__)
    _truth.running_beside("clock", clock,
                          clock_line=_truth.source_line_of("# " + "clock-line", here))


if __name__ == "__main__":
    main()
