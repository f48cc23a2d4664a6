"""A subinterpreter's own GIL (issue 40): interpreter A (isolated: a GIL of its own) has
``a-holder``, entered from the main interpreter, holding A's GIL in C for good (a regex that
backtracks), and ``a-worker``, a thread of A, blocked taking A's GIL when it wakes from a sleep;
from 3.13, ``to-a-waiter`` is blocked taking A's GIL as it enters A from the main interpreter
(3.12's ``run_string`` would run it in the thread state ``a-holder`` runs in: gh-109860). The
main thread parks in the main interpreter, whose GIL nobody holds.

The truth has the threads as subinterpreters.py's and ``gil``: ``holder`` (a-holder's native
id) and ``waiting`` (the native ids of the threads blocked taking A's GIL), ``interpreter`` A's
id.
"""

import os
import platform
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import subinterp_child as child  # noqa: E402
import subinterpreters as base  # noqa: E402


def wait_in_futex(pid, tid, what):
    """Wait until thread `tid` sits in futex (taking a GIL), over two looks."""
    deadline = time.monotonic() + 20
    seen = 0
    while seen < 2:
        seen = seen + 1 if base.why_helpers.syscall_of(pid, tid) == base.FUTEX else 0
        if time.monotonic() > deadline:
            _truth.fail("%s is not blocked in futex" % what)
        time.sleep(0.01)


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "subinterp-records")
    os.makedirs(out_dir, exist_ok=True)
    a = base.create()
    holder = threading.Thread(target=base.enter, name="a-holder", daemon=True, args=(
        a, "hold_gil(%r, 'a-holder', 'a-worker')" % out_dir, out_dir, "a-holder"))
    holder.start()
    recs = base.wait_for(out_dir, ["park-a-holder", "entry-a-holder-0", "park-a-worker"])
    pid = os.getpid()
    worker = recs["park-a-worker"]["native_id"]
    # The worker wakes from its sleep and waits for the GIL the holder keeps.
    wait_in_futex(pid, worker, "a-worker")
    threads = [
        {"native_id": holder.native_id, "thread_id": holder.ident, "name": holder.name,
         "interpreter_id": a,
         "frames": base.segment(recs["park-a-holder"]) + base.segment(recs["entry-a-holder-0"])},
        {"native_id": worker, "thread_id": recs["park-a-worker"]["thread_id"],
         "name": "a-worker", "interpreter_id": a, "frames": base.segment(recs["park-a-worker"])},
    ]
    waiting = [worker]
    if sys.version_info >= (3, 13):
        waiter = threading.Thread(target=base.enter, name="to-a-waiter", daemon=True, args=(
            a, "park_in_sub(%r, 'to-a-waiter')" % out_dir, out_dir, "to-a-waiter"))
        waiter.start()
        entry = base.wait_for(out_dir, ["entry-to-a-waiter-0"])["entry-to-a-waiter-0"]
        wait_in_futex(pid, waiter.native_id, "to-a-waiter")
        threads.append({"native_id": waiter.native_id, "thread_id": waiter.ident,
                        "name": waiter.name, "interpreter_id": 0,
                        "frames": base.segment(entry)})
        waiting.append(waiter.native_id)
    if child.os.path.exists(os.path.join(out_dir, "park-to-a-waiter.json")):
        _truth.fail("to-a-waiter entered A")
    main_thread = threading.current_thread()
    gil = {"holder": holder.native_id, "waiting": waiting, "interpreter": a}
    record(main_thread, threads, a, gil); _truth.HELD.acquire()  # noqa: E702


def record(main_thread, threads, a, gil):
    frames = [dict(f, interpreter_id=0) for f in _truth.frames_from(sys._getframe(1))]
    _truth.write_truth({
        "scenario": "subinterp_gil",
        "python": platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "threads": [{"native_id": main_thread.native_id, "thread_id": main_thread.ident,
                     "name": main_thread.name, "interpreter_id": 0, "frames": frames}] + threads,
        "interpreters": [{"id": i, "whence": base.whence(i)} for i in (0, a)],
        "idle_interpreter": None,
        "gil": gil,
        "running": True,
    })


if __name__ == "__main__":
    main()
