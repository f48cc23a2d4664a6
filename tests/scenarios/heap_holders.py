"""Who holds the memory (issue 51, `heap.retainers`): four containers of 2,000 fresh objects
each, held four ways, and a garbage cycle no root reaches.

- ``_cache``: a dict held by a module global (str keys, bytes values);
- ``Registry.items``: a list held by a class attribute (bytearrays);
- ``keep_fn``'s ``blobs``: a list only a closure cell holds (bytes);
- ``batch``: a list only the local of thread "holder"'s frame ``worker`` holds (bytes);
- a cycle of two lists (one of them holding 2,000 bytes), unreachable, kept by ``gc.disable()``.

The truth has, for each container, its address, type, ``len``, ``sys.getsizeof`` and its
retained bytes computed from the objects it made (the container, and each key and value it
holds, each made here and held nowhere else), and the path it is held by; and the cycle's
addresses.
"""

import gc
import os
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

N = 2000
SIZE = 1000


def retained(container, parts):
    """``sys.getsizeof`` of the container and of each of its parts."""
    return sys.getsizeof(container) + sum(sys.getsizeof(p) for p in parts)


_cache = {}
for _i in range(N):
    _cache["key-%d" % _i] = os.urandom(SIZE)


class Registry:
    items = [bytearray(os.urandom(SIZE)) for _ in range(N)]


def make_keep():
    blobs = [os.urandom(SIZE) for _ in range(N)]

    def keep_fn():
        return blobs
    return keep_fn


keep_fn = make_keep()
RECORDED = {}


def worker(started):
    batch = [os.urandom(SIZE) for _ in range(N)]
    RECORDED["batch"] = {"address": id(batch), "type": "list", "len": len(batch),
                         "bytes": sys.getsizeof(batch), "retained": retained(batch, batch)}
    started.set(); _truth.HELD.acquire()  # noqa: E702


def garbage_cycle():
    """Two lists that refer to each other, one with 2,000 bytes: their addresses."""
    a = []
    b = [a] + [os.urandom(SIZE) for _ in range(N)]
    a.append(b)
    return [id(a), id(b)]


def entry(obj, parts, held_by):
    return {"address": id(obj), "type": type(obj).__name__, "len": len(obj),
            "bytes": sys.getsizeof(obj), "retained": retained(obj, parts), "held_by": held_by}


def record():
    holder = next(t for t in threading.enumerate() if t.name == "holder")
    main = [{"module": "__main__"}]
    blobs = keep_fn.__closure__[0].cell_contents
    containers = [
        entry(_cache, list(_cache) + list(_cache.values()), main + [{"attr": "_cache"}]),
        entry(Registry.items, Registry.items, main + [{"attr": "Registry"}, {"attr": "items"}]),
        entry(blobs, blobs, main + [{"attr": "keep_fn"}, {"closure": "blobs"}]),
        dict(RECORDED["batch"], held_by=[{"local": "batch", "function": "worker",
                                          "thread": holder.native_id}]),
    ]
    return {"containers": containers, "cycle": CYCLE}


gc.disable()
CYCLE = garbage_cycle()
_truth.start_threads({"holder": worker})
_truth.ready(**record()); _truth.HELD.acquire()  # noqa: E702
