"""Objects that other threads made, for a free-threaded build's `--heap`: there each thread
allocates from heaps of its own, and a thread that exits leaves its pages to the
interpreter's pool of abandoned segments.

- `Theirs`: made by a worker thread that is still alive (blocked), in its heap;
- `Orphan`: made by a thread that has exited;
- `Mine`: made by the main thread.

Each group is held only by a function's closure, which the census does not read: it finds
these objects only where the garbage collector does, in the heaps and the pool (on a default
build, on the GC lists).

The truth's `heap.types`: `{type: [count, bytes]}` of the three classes from
`gc.get_objects()` and `sys.getsizeof`; `heap.made`: `{type: count}` as the program made them,
not as the collector finds them (which walks the same heaps as the census).
"""

import gc
import os
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

COUNT = 5000


class Mine:
    def __init__(self, n):
        self.n = n


class Theirs(Mine):
    pass


class Orphan(Mine):
    pass


HOLDERS = {}
MADE = {}


def make(cls):
    made = [cls(i) for i in range(COUNT)]
    HOLDERS[cls.__name__] = lambda: made
    MADE["__main__." + cls.__qualname__] = len(made)


def exits():
    make(Orphan)


def stays(started):
    make(Theirs)
    started.set(); _truth.HELD.acquire()  # noqa: E702


# The thread that stays starts first: a new thread's first allocation takes abandoned
# segments back from the pool (mi_segment_try_reclaim), and the pool is to keep them.
started = threading.Event()
threading.Thread(target=stays, args=(started,), daemon=True).start()
started.wait()
make(Mine)
t = threading.Thread(target=exits)
t.start()
t.join()


def record():
    gc.collect()
    own = (Mine, Theirs, Orphan)
    types = {"__main__." + c.__qualname__: [0, 0] for c in own}
    for o in gc.get_objects():
        if type(o) in own:
            t = types["__main__." + type(o).__qualname__]
            t[0] += 1
            t[1] += sys.getsizeof(o)
    return {"types": types, "objects": {}, "at_least": {}, "made": dict(MADE)}


HEAP = record()
_truth.ready(heap=HEAP); _truth.HELD.acquire()  # noqa: E702
