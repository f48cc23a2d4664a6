"""What grows (issue 51, `pyunwind diff`): a module-level cache that grows on SIGUSR1.

``_cache`` starts with 3,000 entries (a fresh str key and a 1,000-byte bytes value each).
Each SIGUSR1 adds 2,000 more and writes ``grown-N.json`` beside the truth (N: 1, 2, ...): the
cache's address, length, ``sys.getsizeof`` and retained bytes (the dict's, and each key's and
value's: all made here, held nowhere else) after the growth, and how many bytes objects were
added. The truth has the same before any growth.
"""

import json
import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

START = 3000
STEP = 2000
SIZE = 1000
_cache = {}
GROWN = [0]


def add(n):
    for _ in range(n):
        i = len(_cache)
        _cache["key-%d" % i] = os.urandom(SIZE)


def state():
    parts = sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in _cache.items())
    return {"address": id(_cache), "len": len(_cache), "bytes": sys.getsizeof(_cache),
            "retained": sys.getsizeof(_cache) + parts, "value_bytes": sys.getsizeof(b"x" * SIZE),
            "added": STEP, "held_by": [{"module": "__main__"}, {"attr": "_cache"}]}


def grow(signum, frame):
    add(STEP)
    GROWN[0] += 1
    path = os.path.join(os.path.dirname(sys.argv[1]), "grown-%d.json" % GROWN[0])
    with open(path + ".tmp", "w") as f:
        json.dump(state(), f)
    os.replace(path + ".tmp", path)


add(START)
signal.signal(signal.SIGUSR1, grow)
_truth.ready(cache=state()); _truth.HELD.acquire()  # noqa: E702
