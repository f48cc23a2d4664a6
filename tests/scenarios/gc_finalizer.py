"""A garbage collection that stops in a finalizer: main -> collect_now -> gc.collect() ->
(the collector) -> Finalized.__del__, which stops in `time.sleep`. libpython's py-bt marks the
collector's frames with `Garbage-collecting`.

    python gc_finalizer.py TRUTH_JSON READY_FIFO [bystander]

``bystander``: a second thread, started first, blocks in ``HELD.acquire()``: it neither
collects nor holds the GIL.
"""

import gc
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

STOP_SECONDS = 3600


class Finalized:
    def __del__(self):
        _truth.ready(); time.sleep(STOP_SECONDS)  # noqa: E702


def collect_now():
    cycle = Finalized()
    cycle.me = cycle
    del cycle
    gc.collect()


def bystander(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


def main():
    if sys.argv[3:] == ["bystander"]:
        _truth.start_threads({"bystander": bystander})
    gc.disable()
    collect_now()


if __name__ == "__main__":
    main()
