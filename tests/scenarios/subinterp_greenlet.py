"""greenlets in a subinterpreter (issue 40): ``to-green-sub`` enters interpreter G (a legacy
one: greenlet loads in no isolated interpreter) from the main one and, in G, makes a greenlet
that suspends in ``green_leaf`` and one it never starts, then parks in its main greenlet. The
main interpreter has no greenlet.

The truth has the threads as subinterpreters.py's and ``greenlets``: each with its
``address``, ``state``, ``main``, ``parent``, ``type``, ``thread`` (native id) and ``frames``
(each with its ``interpreter_id``: a suspended greenlet's are G's, the running main greenlet's
its thread's, across interpreters).
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
from greenlets_raw import greenlet_dir  # noqa: E402


def create_legacy():
    if sys.version_info >= (3, 13):
        return child.xi.create("legacy")
    base.KEEP.append(child.xi.create(isolated=False))
    return int(base.KEEP[-1])


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "subinterp-records")
    os.makedirs(out_dir, exist_ok=True)
    g = create_legacy()
    t = threading.Thread(target=base.enter, name="to-green-sub", daemon=True, args=(
        g, "park_with_greenlets(%r, 'to-green-sub', %r)" % (out_dir, greenlet_dir()), out_dir,
        "to-green-sub"))
    t.start()
    recs = base.wait_for(out_dir, ["park-to-green-sub", "entry-to-green-sub-0",
                                   "greenlets-to-green-sub"])
    if base.why_helpers.wait_blocked(os.getpid(), [t.native_id], "to-green-sub") != [base.FUTEX]:
        _truth.fail("to-green-sub is not parked")
    frames = base.segment(recs["park-to-green-sub"]) + base.segment(recs["entry-to-green-sub-0"])
    thread = {"native_id": t.native_id, "thread_id": t.ident, "name": t.name,
              "interpreter_id": g, "frames": frames}
    greenlets = []
    for gl in recs["greenlets-to-green-sub"]["greenlets"]:
        gl = dict(gl, thread=t.native_id)
        gl["frames"] = frames if gl["state"] == "running" else [
            dict(f, interpreter_id=g) for f in gl["frames"]]
        greenlets.append(gl)
    main_thread = threading.current_thread()
    record(main_thread, thread, g, greenlets); _truth.HELD.acquire()  # noqa: E702


def record(main_thread, thread, g, greenlets):
    frames = [dict(f, interpreter_id=0) for f in _truth.frames_from(sys._getframe(1))]
    _truth.write_truth({
        "scenario": "subinterp_greenlet",
        "python": platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "gil_holder": None,
        "threads": [{"native_id": main_thread.native_id, "thread_id": main_thread.ident,
                     "name": main_thread.name, "interpreter_id": 0, "frames": frames}, thread],
        "interpreters": [{"id": i, "whence": base.whence(i)} for i in (0, g)],
        "idle_interpreter": None,
        "greenlets": greenlets,
    })


if __name__ == "__main__":
    main()
