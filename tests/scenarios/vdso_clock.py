"""A thread that asks for its CPU time in a loop (``time.thread_time()``, issue 52's shares.py
does the same): the C library calls the vDSO's ``clock_gettime``, and the kernel's
thread-CPU clock is a system call made from inside the vDSO, so a thread stopped by a
debugger or ``gcore`` is nearly always stopped there, in code of no file. The main thread
records the truth and blocks in ``_truth.HELD.acquire()``.
"""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def clock(started):
    started.set()
    while True:
        time.thread_time()  # clock-line


def record(caller):
    here = os.path.abspath(__file__)
    by_name = {t.name: t for t in threading.enumerate()}
    return _truth.header(
        running=True,
        threads=[_truth._thread_entry(threading.current_thread(), _truth.frames_from(caller)),
                 _truth._thread_entry(by_name["clock"], [])],
        clock_line=_truth.source_line_of("# " + "clock-line", here))


def main():
    _truth.start_threads({"clock": clock})
    _truth.write_truth(record(sys._getframe(0))); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
