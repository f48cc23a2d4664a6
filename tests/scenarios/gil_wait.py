"""Threads contending for the GIL: three workers and the main thread spin in Python, so at any
moment one holds the GIL and the others wait for it (libpython's py-bt: `Waiting for the
GIL`). Without a GIL (free-threaded builds) nobody waits.
"""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

WORKERS = 3
SPIN_START_SECONDS = 0.2


def spin():
    while True:
        pass


def main():
    for i in range(WORKERS):
        threading.Thread(target=spin, name="spinner-%d" % i, daemon=True).start()
    time.sleep(SPIN_START_SECONDS)
    main_spin()


def main_spin():
    _truth.ready(running=True)
    spin()


if __name__ == "__main__":
    main()
