"""A program that stops itself for a debugger attached to qemu-user's gdb stub.

qemu's stub cannot interrupt a guest blocked in a system call, so a debugger attached to it
gets control only when the guest takes a signal: after recording its truth (with the locals of
``inner``), the main thread sends itself SIGUSR1 (a C call, on the line the truth names), while
a worker waits in ``HELD.acquire()``. The debugger (gdb-multiarch, lldb) stops on the signal. Run as ``python stub_stop.py TRUTH_JSON``; it is
not one of the FIFO-driven scenarios (no ``__main__`` guard, so the harness does not list it).
"""

import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

KILL_LINE = _truth.source_line_of("@@" + "KILL@@", __file__)


def worker(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


def record(caller):
    """The truth, with the locals of `caller` (which then stops on the KILL line)."""
    truth = _truth.collect(caller, with_locals=True)
    truth["threads"][0]["frames"][0]["line"] = KILL_LINE
    # os.kill keeps the GIL: this thread holds it at the stop.
    truth["gil_holder"] = truth["threads"][0]["thread_id"]
    _truth.write_truth(truth, signal=False)


def inner(count=3):
    label, items = "stub", [count, 2.5, None]
    record(sys._getframe())
    os.kill(os.getpid(), signal.SIGUSR1)  # @@KILL@@


def outer():
    inner()


signal.signal(signal.SIGUSR1, lambda *_: None)
_truth.start_threads({"stub-worker": worker})
outer()
