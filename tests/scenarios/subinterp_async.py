"""asyncio in a subinterpreter (issue 40): the thread ``to-async-sub`` enters interpreter A
from the main one and runs an event loop there (subinterp_child.run_loop): the main task is
on-CPU, blocked on its recording line; ``chain`` awaits ``waiter``, which awaits an Event.
``loop-in-main`` runs the same in the main interpreter, whose asyncio has types of its own. The
main thread stays in the main interpreter.

The truth has the threads as subinterpreters.py's (each frame with its ``interpreter_id``),
``tasks`` (each with its ``id``, ``name``, ``awaited_by``, ``on_cpu``, ``frames`` and the
``native_id`` of its loop's thread, as A recorded them) and ``loops`` (``id``, ``native_id``,
``frames``: the loop thread's stack from the loop outwards, into the main interpreter).
"""

import os
import platform
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import subinterp_child as child  # noqa: E402
import subinterpreters as base  # noqa: E402


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "subinterp-records")
    os.makedirs(out_dir, exist_ok=True)
    a = base.create()
    t = threading.Thread(target=base.enter, name="to-async-sub", daemon=True, args=(
        a, "run_loop(%r, 'to-async-sub')" % out_dir, out_dir, "to-async-sub"))
    t.start()
    m = threading.Thread(target=child.run_loop, name="loop-in-main", daemon=True,
                         args=(out_dir, "loop-in-main"))
    m.start()
    recs = base.wait_for(out_dir, ["park-to-async-sub", "entry-to-async-sub-0",
                                   "park-loop-in-main"])
    park, entry, main_park = (recs["park-to-async-sub"], recs["entry-to-async-sub-0"],
                              recs["park-loop-in-main"])
    calls = base.why_helpers.wait_blocked(os.getpid(), [park["native_id"], m.native_id],
                                          "the loop threads")
    if calls != [base.FUTEX] * 2:
        _truth.fail("the loop threads are in %r" % calls)
    outer = base.segment(entry)
    threads = [{"native_id": t.native_id, "thread_id": t.ident, "name": t.name,
                "interpreter_id": a, "frames": base.segment(park) + outer},
               {"native_id": m.native_id, "thread_id": m.ident, "name": m.name,
                "interpreter_id": 0, "frames": base.segment(main_park)}]
    tasks, loops = [], []
    for rec, thread, interp, tail in ((park, t, a, outer), (main_park, m, 0, [])):
        tasks += [dict(task, native_id=thread.native_id, loop=rec["loop"],
                       frames=[dict(f, interpreter_id=interp) for f in task["frames"]])
                  for task in rec["tasks"]]
        loops.append({"id": rec["loop"], "native_id": thread.native_id,
                      "frames": [dict(f, interpreter_id=interp) for f in rec["loop_frames"]]
                      + tail})
    main_thread = threading.current_thread()
    record(main_thread, threads, a, tasks, loops); _truth.HELD.acquire()  # noqa: E702


def record(main_thread, threads, a, tasks, loops):
    frames = [dict(f, interpreter_id=0) for f in _truth.frames_from(sys._getframe(1))]
    _truth.write_truth({
        "scenario": "subinterp_async",
        "python": platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "gil_holder": None,
        "threads": [{"native_id": main_thread.native_id, "thread_id": main_thread.ident,
                     "name": main_thread.name, "interpreter_id": 0, "frames": frames}] + threads,
        "interpreters": [{"id": i, "whence": base.whence(i)} for i in (0, a)],
        "idle_interpreter": None,
        "tasks": tasks,
        "loops": loops,
    })


if __name__ == "__main__":
    main()
