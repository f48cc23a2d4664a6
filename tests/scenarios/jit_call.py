"""A hot loop whose JIT code calls into C and blocks there (CPython 3.14+, PYTHON_JIT=1).

``leaf`` runs ``HELD.acquire(i == LAST)`` ITERATIONS times: a C method called from the
executor's code once the loop is hot; the last call blocks for good. So the native stack is
futex wait <- ... <- lock.acquire <- [JIT code of leaf] <- _PyEval_EvalFrameDefault <- ...

The truth is recorded before the loop, with the innermost line moved to the blocking line; a
watcher thread signals ready once the main thread sleeps (not runs) inside ``leaf``.
"""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

ITERATIONS = 50_000


def _sleeping(native_id):
    with open("/proc/self/task/%d/stat" % native_id) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"


def _watch(ident, native_id, code):
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while True:
        frame = sys._current_frames().get(ident)
        if frame is not None and frame.f_code is code and _sleeping(native_id):
            break
        if time.monotonic() > deadline:
            _truth.fail("the main thread never blocked in leaf")
        time.sleep(0.01)
    # Part of the process the harness reads: in the truth too.
    _truth._join_truth(sys._getframe(0)); _truth.HELD.acquire()  # noqa: E702


def leaf(n):
    me = threading.current_thread()
    truth = _truth.collect(sys._getframe())
    truth["threads"][0]["frames"][0]["line"] = _truth.source_line_of("@@" + "BLOCK@@", __file__)
    truth["jit"] = bool(sys._jit.is_enabled())
    _truth.write_truth(truth, signal=False)
    threading.Thread(target=_watch, args=(me.ident, me.native_id, leaf.__code__), name="ready-signal",
                     daemon=True).start()
    last = n - 1
    for i in range(n):
        _truth.HELD.acquire(i == last)  # @@BLOCK@@


def rec(depth):
    if depth:
        return rec(depth - 1)
    return leaf(ITERATIONS)


if __name__ == "__main__":
    rec(3)
