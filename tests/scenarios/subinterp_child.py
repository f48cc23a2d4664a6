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


# This interpreter's own RLock (each interpreter imports this module anew).
RLOCK = threading.RLock()


def wait_for_rlock(out_dir, label):
    park_here(out_dir, label); RLOCK.acquire()  # noqa: E702


def hold_rlock(out_dir, label):
    with RLOCK:
        write(out_dir, "rlock-" + label, {"object": id(RLOCK)})
        park_here(out_dir, label); _truth.HELD.acquire()  # noqa: E702


def hop(out_dir, label, target_id):
    """Enter interpreter ``target_id`` from this one, and park there."""
    run_in(target_id, code_for(out_dir, "park_in_sub(%r, %r)" % (out_dir, label)), out_dir, label)


def park_with_worker(out_dir, label, worker_label, holder_label):
    """Start a thread of this interpreter's own that holds its RLock and parks, and one that
    waits for that RLock, then park."""
    import time

    threading.Thread(target=hold_rlock, args=(out_dir, holder_label), name=holder_label).start()
    while not os.path.exists(os.path.join(out_dir, "park-%s.json" % holder_label)):
        time.sleep(0.01)
    t = threading.Thread(target=wait_for_rlock, args=(out_dir, worker_label), name=worker_label)
    t.start()
    park_in_sub(out_dir, label)


# --- asyncio in a subinterpreter (subinterp_async.py) ---------------------------------------

FOREVER = 100000


def _frame(f):
    return {"function": _truth.code_name(f.f_code), "file": f.f_code.co_filename,
            "line": f.f_lineno}


def _chain(coro):
    """A suspended coroutine's frames, innermost first (`cr_await` down to the leaf)."""
    frames = []
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        frames.append(_frame(coro.cr_frame))
        coro = coro.cr_await
    frames.reverse()
    return frames


async def waiter(event):
    await event.wait()


async def chain(inner):
    await inner


async def loop_main(out_dir, label):
    """The main task: starts `waiter` (awaits an Event) and `chain` (awaits `waiter`), lets
    them suspend, then records the tasks and its thread's stack and blocks the loop's thread
    on the same line (the task on-CPU)."""
    import asyncio

    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    w = asyncio.create_task(waiter(event), name="waiter")
    c = asyncio.create_task(chain(w), name="chain")
    for _ in range(3):
        await asyncio.sleep(0)
    me = asyncio.current_task()

    def record(caller):
        thread = _truth.frames_from(caller)
        tasks = [{"id": id(me), "name": me.get_name(), "awaited_by": [], "on_cpu": True,
                  "frames": thread[:1]}]
        for t, by in ((c, []), (w, [id(c)])):
            tasks.append({"id": id(t), "name": t.get_name(), "awaited_by": by,
                          "on_cpu": False, "frames": _chain(t.get_coro())})
        write(out_dir, "park-" + label, {"frames": thread, "tasks": tasks, "loop": id(loop),
                                         "loop_frames": thread[1:]})

    record(sys._getframe(0)); _truth.HELD.acquire()  # noqa: E702


def run_loop(out_dir, label):
    """Run an event loop in this interpreter (`loop_main`)."""
    import asyncio

    asyncio.run(loop_main(out_dir, label))


# --- a subinterpreter's own GIL (subinterp_gil.py) --------------------------------------------

# Backtracks for ages on a string of 64 `a`s and a `b`, in C, holding the GIL (the regex engine
# neither releases it nor lets the eval loop hand it over).
BACKTRACK = r"(a+)+$"


def wait_for_gil(out_dir, label):
    """Record, then sleep: on waking it needs this interpreter's GIL, which `hold_gil` keeps."""
    import time

    park_here(out_dir, label); time.sleep(0.5)  # noqa: E702


def hold_gil(out_dir, label, worker_label):
    """Start `wait_for_gil` in a thread of this interpreter, then hold the GIL for good."""
    import re
    import time

    pattern = re.compile(BACKTRACK)
    threading.Thread(target=wait_for_gil, args=(out_dir, worker_label), name=worker_label).start()
    while not os.path.exists(os.path.join(out_dir, "park-%s.json" % worker_label)):
        time.sleep(0.01)
    park_here(out_dir, label); pattern.match("a" * 64 + "b")  # noqa: E702


# --- greenlets in a legacy subinterpreter (subinterp_greenlet.py) ----------------------------


def green_leaf(main):
    """Runs in a greenlet: records its frame, then switches back to the main greenlet and stays
    suspended on that line."""
    me = sys._getframe(0)
    GREEN["leaf_frames"] = _truth.frames_from(me)[:1]; main.switch()  # noqa: E702


GREEN = {}


def park_with_greenlets(out_dir, label, greenlet_dir):
    """In this (legacy: greenlet supports no isolated interpreter) interpreter: a greenlet
    suspended in `green_leaf`, one never started; then park in the thread's main greenlet."""
    sys.path.insert(0, greenlet_dir)
    import greenlet

    main = greenlet.getcurrent()
    leaf = greenlet.greenlet(green_leaf)
    leaf.switch(main)
    pending = greenlet.greenlet(green_leaf)
    GREEN["keep"] = (leaf, pending)
    write(out_dir, "greenlets-" + label, {"greenlets": [
        {"address": id(main), "state": "running", "main": True, "parent": None,
         "type": _truth.type_name(type(main))},
        {"address": id(leaf), "state": "suspended", "main": False, "parent": id(main),
         "type": _truth.type_name(type(leaf)), "frames": GREEN["leaf_frames"]},
        {"address": id(pending), "state": "not_started", "main": False, "parent": id(main),
         "type": _truth.type_name(type(pending)), "frames": []},
    ]})
    park_in_sub(out_dir, label)


# --- InterpreterPoolExecutor (subinterp_pool.py, 3.14+) -------------------------------------

# The C calls that run code in another interpreter.
SWITCHES = {"exec", "call", "run_func", "run_string"}


def record_entries(out_dir):
    """A profile hook for the threads `threading` starts from now on: at each one's first call
    that switches interpreters (an InterpreterPoolExecutor worker's `_interpreters.call`), its
    frames, as `entry-<native id>-<interpreter id>`."""
    here = current_id()

    def hook(frame, event, arg):
        if (event == "c_call" and getattr(arg, "__name__", None) in SWITCHES
                and getattr(arg, "__module__", None) == SWITCH[0]):
            sys.setprofile(None)
            write(out_dir, "entry-%d-%d" % (threading.get_native_id(), here),
                  {"frames": _truth.frames_from(frame)})

    threading.setprofile(hook)


def pool_park(out_dir, label):
    """A task of an InterpreterPoolExecutor: record in the worker's interpreter, then park."""
    park_here(out_dir, label); _truth.HELD.acquire()  # noqa: E702
