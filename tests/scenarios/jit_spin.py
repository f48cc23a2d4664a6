"""A pure-Python hot loop that stays inside JIT code (CPython 3.14+, PYTHON_JIT=1).

``spin``'s loop is one line of local loads, a truth test and a jump: once hot, its executor
runs it without calling into C, so a debugger that stops the process almost always finds the PC
inside JIT code. The truth is recorded before the loop, innermost line moved to the loop line;
a watcher thread signals ready once the loop has been running for a while.
"""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

WARM_SECONDS = 0.5


def _watch(ident, code):
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while True:
        frame = sys._current_frames().get(ident)
        if frame is not None and frame.f_code is code and frame.f_lineno == LOOP_LINE:
            break
        if time.monotonic() > deadline:
            _truth.fail("the main thread never reached the loop")
        time.sleep(0.01)
    time.sleep(WARM_SECONDS)
    _truth.signal_ready(); _truth.HELD.acquire()  # noqa: E702


LOOP_LINE = _truth.source_line_of("@@" + "LOOP@@", __file__)


def spin():
    truth = _truth.collect(sys._getframe())
    truth["threads"][0]["frames"][0]["line"] = LOOP_LINE
    truth["jit"] = bool(sys._jit.is_enabled())
    truth["running"] = True
    _truth.write_truth(truth, signal=False)
    threading.Thread(target=_watch, args=(threading.get_ident(), spin.__code__), name="ready-signal",
                     daemon=True).start()
    flag = True
    while flag: pass  # @@LOOP@@  # noqa: E701


def rec(depth):
    if depth:
        return rec(depth - 1)
    return spin()


if __name__ == "__main__":
    rec(3)
