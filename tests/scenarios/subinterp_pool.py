"""An InterpreterPoolExecutor (3.14+, issue 40): two tasks, each parked in the interpreter of
its worker thread (``ipe_0``, ``ipe_1``), entered from the main interpreter by the worker's
``_interpreters.call``. The main thread parks in the main interpreter.

The truth has the threads as subinterpreters.py's (the workers' frames in the main interpreter
recorded by a profile hook at the call that switches) and ``interpreters``.
"""

import os
import platform
import sys
import threading
from concurrent.futures import InterpreterPoolExecutor

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import subinterp_child as child  # noqa: E402
import subinterpreters as base  # noqa: E402

POOL = []


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "subinterp-records")
    os.makedirs(out_dir, exist_ok=True)
    child.record_entries(out_dir)
    pool = InterpreterPoolExecutor(max_workers=2, thread_name_prefix="ipe")
    POOL.append(pool)
    labels = ["task-a", "task-b"]
    futures = [pool.submit(child.pool_park, out_dir, label) for label in labels]
    POOL.append(futures)
    recs = base.wait_for(out_dir, ["park-" + label for label in labels])
    workers = {t.native_id: t for t in threading.enumerate() if t.name.startswith("ipe")}
    threads, ids = [], [0]
    for label in labels:
        park = recs["park-" + label]
        tid = park["native_id"]
        entry = base.wait_for(out_dir, ["entry-%d-0" % tid])["entry-%d-0" % tid]
        t = workers[tid]
        threads.append({"native_id": tid, "thread_id": t.ident, "name": t.name,
                        "interpreter_id": park["interpreter_id"],
                        "frames": base.segment(park) + base.segment(entry)})
        ids.append(park["interpreter_id"])
    if len(set(ids)) != 3:
        _truth.fail("the tasks ran in interpreters %r" % ids)
    calls = base.why_helpers.wait_blocked(os.getpid(), sorted(workers), "the workers")
    if calls != [base.FUTEX] * 2:
        _truth.fail("the workers are in %r" % calls)
    main_thread = threading.current_thread()
    record(main_thread, threads, ids); _truth.HELD.acquire()  # noqa: E702


def record(main_thread, threads, ids):
    frames = [dict(f, interpreter_id=0) for f in _truth.frames_from(sys._getframe(1))]
    _truth.write_truth({
        "scenario": "subinterp_pool",
        "python": platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "gil_holder": None,
        "threads": [{"native_id": main_thread.native_id, "thread_id": main_thread.ident,
                     "name": main_thread.name, "interpreter_id": 0, "frames": frames}] + threads,
        "interpreters": [{"id": i, "whence": base.whence(i)} for i in sorted(ids)],
        "idle_interpreter": None,
    })


if __name__ == "__main__":
    main()
