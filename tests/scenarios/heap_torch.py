"""The memory of torch tensors (issue 51 item 4): CPU tensors that own their storage, views
that share one, and a storage two retainers share. Run by the torch venv (tools/torch.sh).

- ``OWNED``: a list of 4 tensors, each with a storage of its own, held by nothing else;
- ``PAIR``: a list of a tensor and a view of it (one storage, counted once);
- ``LEFT`` and ``RIGHT``: a list each, of 1,000 views (rows) of one storage whose first tensor
  is gone: the storage is kept by both, so by neither alone (its dominator is above both);
- ``SHARED`` and ``VIEWS``: a tensor held by a global and a list of 1,000 views of it;
(each list of views retains some 80 KB, among the 60 retainers of the process that keep most.)
- the main thread's frame ``stop`` has tensors as locals: 2, 1 and 6 dimensions (beyond 5,
  torch keeps the sizes out of line).

The truth has ``tensors``: for every tensor of the process (``gc.get_objects()``), its
``untyped_storage().nbytes()`` and ``data_ptr()`` and ``sys.getsizeof``; ``lists``: each list's
address, ``len``, ``sys.getsizeof`` and retained bytes (the list's, each tensor's getsizeof and
the storages only it keeps); ``summaries``: `{local: text}` as pyunwind is to show each local
tensor; and ``torch``: its version.

On SIGUSR1 it makes ten more tensors of their own storages, held by ``GROWN``, and writes
``grown-1.json`` beside the truth: how many, their ``sys.getsizeof`` and their storages' bytes
(what `pyunwind diff` of reports before and after is to say).
"""

import gc
import json
import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import torch  # noqa: E402

OWNED = [torch.ones(100 + i, 1000) for i in range(4)]
_x = torch.arange(30000, dtype=torch.int64)
PAIR = [_x, _x.view(100, 300)]
del _x
_base = torch.zeros(2000, 100, dtype=torch.float64)
LEFT = [_base[i] for i in range(1000)]
RIGHT = [_base[1000 + i] for i in range(1000)]
del _base
SHARED = torch.ones(500, 1000, dtype=torch.float16)
VIEWS = [SHARED[i % 500] for i in range(1000)]


def storage(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def retained(lst, own_storages):
    """The list's getsizeof, its tensors', and the storages it alone keeps."""
    seen = {storage(t) for t in own_storages}
    return (sys.getsizeof(lst) + sum(sys.getsizeof(t) for t in lst)
            + sum(n for _, n in seen))


def summary(t):
    return "<torch.Tensor shape=[%s] dtype=%s device=%s at %#x>" % (
        ", ".join(str(d) for d in t.shape), t.dtype, t.device, id(t))


def record():
    gc.collect()
    tensors = {str(id(o)): [storage(o)[1], storage(o)[0], sys.getsizeof(o)]
               for o in gc.get_objects() if isinstance(o, torch.Tensor)}
    lists = []
    for lst, own in ((OWNED, OWNED), (PAIR, PAIR), (LEFT, []), (RIGHT, []), (VIEWS, [])):
        lists.append({"address": id(lst), "len": len(lst), "bytes": sys.getsizeof(lst),
                      "retained": retained(lst, own)})
    return {"tensors": tensors, "lists": lists, "torch": torch.__version__}


GROWN = []


def grow(signum, frame):
    new = [torch.ones(100, 1000) for _ in range(10)]
    GROWN.extend(new)
    data = {"added": len(new), "bytes": sum(sys.getsizeof(t) for t in new),
            "data_bytes": sum(storage(t)[1] for t in new)}
    path = os.path.join(os.path.dirname(sys.argv[1]), "grown-1.json")
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


signal.signal(signal.SIGUSR1, grow)


def stop():
    grid = torch.zeros(1000, 1000)
    half = SHARED[::2]
    big = torch.ones(2, 3, 4, 5, 6, 7, dtype=torch.float64)
    summaries = {"grid": summary(grid), "half": summary(half), "big": summary(big)}
    _truth.ready(summaries=summaries, **record()); _truth.HELD.acquire()  # noqa: E702


stop()
