"""The memory of numpy arrays (issue 51 item 4): arrays that own their data, views that do not,
and numpy scalars and arrays in a frame's locals. numpy comes from the folder named by
$PYUNWIND_NUMPY (tools/numpy.sh), put first on sys.path.

- ``ARRAYS``: a list (a module global) of 10 arrays that own their data, of several dtypes and
  shapes, each held by nothing else;
- ``VIEWS``: a list of 5 views, each of an array only that view holds (its ``base``);
- ``DTYPES``: the arrays' dtypes, held here too: a built-in dtype is one object shared by every
  array of it, so no list dominates it;
- the main thread's frame ``stop`` has numpy scalars and an array and a view as locals.

The truth has ``arrays``: `{id: [getsizeof, nbytes, owns]}` for every array made here (the
views' bases too), ``lists``: the two lists' address, ``len``, ``sys.getsizeof`` and retained
bytes (the list's and each array's getsizeof, a view's base's too), ``numpy`` (its version),
``summaries``: `{local: text}` as pyunwind is to show an array, and ``rss`` (VmRSS, bytes)
read at the stop.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ["PYUNWIND_NUMPY"])
import _truth  # noqa: E402
import numpy as np  # noqa: E402

ARRAYS = [np.ones(100_000 + i, dtype=dt) for i, dt in enumerate(
    ["float64", "float32", "int8", "int16", "int32", "int64", "uint8", "uint64", "bool",
     "complex128"])]
ARRAYS[1] = np.zeros((300, 400), dtype="float32")
ARRAYS[2] = np.zeros((20, 30, 40), dtype="int8")
VIEWS = [np.arange(1000.0 * (i + 1))[::2] for i in range(5)]
DTYPES = [a.dtype for a in ARRAYS + VIEWS]


def record_array(a, out):
    out[str(id(a))] = [sys.getsizeof(a), a.nbytes, bool(a.flags.owndata)]


def summary(a):
    return "<numpy.ndarray shape=%s dtype=%s at %#x>" % (a.shape, a.dtype, id(a))


def rss():
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def record(grid, part):
    """The truth's arrays and lists (in a function of its own: its loop variables, which hold
    arrays, are gone when it returns)."""
    arrays = {}
    for a in ARRAYS + VIEWS + [v.base for v in VIEWS] + [grid, part]:
        record_array(a, arrays)
    lists = []
    for lst, parts in ((ARRAYS, ARRAYS), (VIEWS, VIEWS + [v.base for v in VIEWS])):
        lists.append({"address": id(lst), "len": len(lst), "bytes": sys.getsizeof(lst),
                      "retained": sys.getsizeof(lst) + sum(sys.getsizeof(p) for p in parts)})
    return {"arrays": arrays, "lists": lists, "numpy": np.__version__,
            "summaries": {"grid": summary(grid), "part": summary(part)}}


def stop():
    i8 = np.int8(-3)  # noqa: F841 (the locals are what the test reads)
    u16 = np.uint16(65000)  # noqa: F841
    i64 = np.int64(1234567890123)  # noqa: F841
    f64 = np.float64(1.5)  # noqa: F841
    f32 = np.float32(0.1)  # noqa: F841
    flag = np.True_  # noqa: F841
    grid = np.zeros((1000, 1000))
    part = grid[::2, ::5]
    _truth.ready(with_locals=True, rss=rss(), **record(grid, part))
    _truth.HELD.acquire()


stop()
