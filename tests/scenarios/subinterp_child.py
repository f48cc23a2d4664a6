"""What runs inside the subinterpreters of subinterpreters.py (issue 40), imported by the code
each interpreter executes. Not a scenario itself (no ``__main__``).

Each interpreter this module runs in records, into a JSON file of ``OUT_DIR``, the segments of
the threads it runs: ``park`` (a thread that stops here, its frames in this interpreter),
``entry`` (a thread that enters another interpreter from here: its frames at the call, taken
by a profile hook at the C call that switches interpreters, ``_interpreters.exec`` or
``_xxsubinterpreters.run_string``) and ``worker`` (a thread started by this interpreter's own
``threading``). Every record carries the thread's native id and the id of the interpreter it
was made in, as that interpreter gives it.
"""

import json
import os
import sys
import threading

import _truth

# Which private module switches interpreters: 3.13+ `_interpreters` (`exec`), 3.12
# `_xxsubinterpreters` (`run_string`).
if sys.version_info >= (3, 13):
    import _interpreters as xi

    SWITCH = ("_interpreters", "exec")
else:
    import _xxsubinterpreters as xi

    SWITCH = ("_xxsubinterpreters", "run_string")


def current_id():
    """This interpreter's id: 3.14+ `concurrent.interpreters.get_current().id`, 3.13
    `_interpreters.get_current()` (id, whence), 3.12 an `InterpreterID`."""
    if sys.version_info >= (3, 14):
        from concurrent import interpreters

        return interpreters.get_current().id
    cur = xi.get_current()
    return int(cur[0] if isinstance(cur, tuple) else cur)


def write(out_dir, name, record):
    record.update(native_id=threading.get_native_id(), thread_id=threading.get_ident(),
                  interpreter_id=current_id())
    path = os.path.join(out_dir, name + ".json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def run_in(target_id, code, out_dir, label):
    """Run ``code`` in interpreter ``target_id`` from this thread, recording this thread's
    frames in this interpreter at the call that switches (``entry-<label>-<id>``)."""
    here = current_id()

    def hook(frame, event, arg):
        if (event == "c_call" and getattr(arg, "__name__", None) == SWITCH[1]
                and getattr(arg, "__module__", None) == SWITCH[0]):
            sys.setprofile(None)
            write(out_dir, "entry-%s-%d" % (label, here), {"frames": _truth.frames_from(frame)})

    sys.setprofile(hook)
    if sys.version_info >= (3, 14):
        from concurrent import interpreters

        interpreters.Interpreter(target_id).exec(code)
    elif sys.version_info >= (3, 13):
        xi.exec(target_id, code)
    else:
        xi.run_string(target_id, code)


def code_for(out_dir, call):
    """The source an interpreter executes: import this module (from the scenarios' folder)
    and make ``call``."""
    here = os.path.dirname(os.path.abspath(__file__))
    return ("import sys\nsys.path.insert(0, %r)\nimport subinterp_child\nsubinterp_child.%s\n"
            % (here, call))


def park_here(out_dir, label):
    write(out_dir, "park-" + label, {"frames": _truth.frames_from(sys._getframe(1))})


def park_in_sub(out_dir, label):
    park_here(out_dir, label); _truth.HELD.acquire()  # noqa: E702


def worker_in_sub(out_dir, label):
    park_here(out_dir, label); _truth.HELD.acquire()  # noqa: E702


def hop(out_dir, label, target_id):
    """Enter interpreter ``target_id`` from this one, and park there."""
    run_in(target_id, code_for(out_dir, "park_in_sub(%r, %r)" % (out_dir, label)), out_dir, label)


def park_with_worker(out_dir, label, worker_label):
    """Start a thread of this interpreter's own that parks, then park."""
    t = threading.Thread(target=worker_in_sub, args=(out_dir, worker_label), name=worker_label)
    t.start()
    park_in_sub(out_dir, label)
