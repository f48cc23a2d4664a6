"""Threads that come and go while a process is recorded (issue 52, item 6): the main thread
starts a thread "churn-N" every few milliseconds, each spinning in ``churn`` for
CHURN_SECONDS and then ending, and waits for it in ``Thread.join``; thread "steady" spins in
``steady`` throughout.

The truth has ``places``: the line of each spin and of main's loop.
"""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

CHURN_SECONDS = 0.02


def churn():
    end = time.monotonic() + CHURN_SECONDS
    while time.monotonic() < end: pass  # spin-churn  # noqa: E701


def steady(started):
    started.set()
    while True: pass  # spin-steady  # noqa: E701


def main():
    _truth.start_threads({"steady": steady})
    here = os.path.abspath(__file__)
    _truth.write_truth({
        "scenario": "record_churn",
        "python": _truth.platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "running": True,
        "threads": [],
        "places": {name: _truth.source_line_of("# " + name, here)
                   for name in ("spin-churn", "spin-steady", "join-churn")},
    })
    n = 0
    while True:
        n += 1
        t = threading.Thread(target=churn, name="churn-%d" % n)
        t.start(); t.join()  # join-churn  # noqa: E702


if __name__ == "__main__":
    main()
