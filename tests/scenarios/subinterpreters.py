"""Subinterpreters (issue 40): threads that run in other interpreters than the main one, and
enter them from it.

- ``MainThread`` stays in the main interpreter (0);
- ``to-sub1`` enters interpreter A from the main one (3.14+: ``Interpreter.exec`` of
  ``concurrent.interpreters``; 3.13: ``_interpreters.exec``; 3.12: ``_xxsubinterpreters.run_string``)
  and parks there, after A has started two threads of its own (threads of A only):
  ``sub1-locker`` holds A's RLock in a ``with`` block and parks, ``sub1-worker`` waits for
  that RLock;
- ``to-sub2-sub3`` enters B from the main interpreter, then C from B (a nested entry), and
  parks in C;
- interpreter D has no thread at all.

A, B, C and D are made isolated (3.12: ``isolated=True``, their own GIL). Every interpreter
records what it sees (subinterp_child.py); the truth joins, by native id, each thread's
segments into one stack, innermost interpreter first: ``threads[i].frames[j].interpreter_id``
and ``threads[i].interpreter_id`` (the interpreter it runs in now). ``interpreters``: each
interpreter's id and ``whence`` (``_interpreters.whence``, 3.13+; null on 3.12), main first,
then by creation. ``idle_interpreter``: D's id. ``rlock``: A's RLock (``object``), its
``holder`` and its ``waiter`` (native ids).
"""

import glob
import json
import os
import platform
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import subinterp_child as child  # noqa: E402
import why_helpers  # noqa: E402

# The futex system call (x86-64, arm64): where each parked thread waits in HELD.acquire().
FUTEX = {"x86_64": "202", "aarch64": "98"}[platform.machine()]


# What keeps each interpreter alive: 3.14's `Interpreter` and 3.12's `InterpreterID` destroy
# theirs when the last reference goes.
KEEP = []


def create():
    if sys.version_info >= (3, 14):
        from concurrent import interpreters

        KEEP.append(interpreters.create())
        return KEEP[-1].id
    if sys.version_info >= (3, 13):
        return child.xi.create("isolated")
    KEEP.append(child.xi.create(isolated=True))
    return int(KEEP[-1])


def whence(iid):
    return child.xi.whence(iid) if hasattr(child.xi, "whence") else None


def enter(target_id, call, out_dir, label):
    child.run_in(target_id, child.code_for(out_dir, call), out_dir, label)


def wait_for(out_dir, names):
    deadline = time.monotonic() + 30
    while True:
        have = {os.path.basename(p)[:-5] for p in glob.glob(os.path.join(out_dir, "*.json"))}
        if set(names) <= have:
            break
        if time.monotonic() > deadline:
            _truth.fail("records %r missing" % sorted(set(names) - have))
        time.sleep(0.01)
    out = {}
    for name in names:
        with open(os.path.join(out_dir, name + ".json"), encoding="utf-8") as f:
            out[name] = json.load(f)
    return out


def segment(record):
    return [dict(f, interpreter_id=record["interpreter_id"]) for f in record["frames"]]


def stop(out_dir, ids):
    a, b, c, d = ids
    names = threading.Thread(target=enter, name="to-sub1", daemon=True, args=(
        a, "park_with_worker(%r, 'to-sub1', 'sub1-worker', 'sub1-locker')" % out_dir, out_dir,
        "to-sub1"))
    names.start()
    nested = threading.Thread(target=enter, name="to-sub2-sub3", daemon=True, args=(
        b, "hop(%r, 'to-sub2-sub3', %d)" % (out_dir, c), out_dir, "to-sub2-sub3"))
    nested.start()
    recs = wait_for(out_dir, ["park-to-sub1", "park-sub1-worker", "entry-to-sub1-0",
                              "park-sub1-locker", "rlock-sub1-locker",
                              "park-to-sub2-sub3", "entry-to-sub2-sub3-%d" % b,
                              "entry-to-sub2-sub3-0"])
    pid = os.getpid()
    parked = [recs[n]["native_id"] for n in ("park-to-sub1", "park-sub1-worker",
                                             "park-sub1-locker", "park-to-sub2-sub3")]
    calls = why_helpers.wait_blocked(pid, parked, "parked threads")
    if any(c != FUTEX for c in calls):
        _truth.fail("parked threads in system calls %r" % calls)
    threads = [
        {"native_id": names.native_id, "thread_id": names.ident, "name": "to-sub1",
         "interpreter_id": a,
         "frames": segment(recs["park-to-sub1"]) + segment(recs["entry-to-sub1-0"])},
        {"native_id": recs["park-sub1-worker"]["native_id"],
         "thread_id": recs["park-sub1-worker"]["thread_id"],
         "name": "sub1-worker", "interpreter_id": a,
         "frames": segment(recs["park-sub1-worker"])},
        {"native_id": recs["park-sub1-locker"]["native_id"],
         "thread_id": recs["park-sub1-locker"]["thread_id"],
         "name": "sub1-locker", "interpreter_id": a,
         "frames": segment(recs["park-sub1-locker"])},
        {"native_id": nested.native_id, "thread_id": nested.ident, "name": "to-sub2-sub3",
         "interpreter_id": c,
         "frames": segment(recs["park-to-sub2-sub3"])
         + segment(recs["entry-to-sub2-sub3-%d" % b]) + segment(recs["entry-to-sub2-sub3-0"])},
    ]
    by_name = {t["name"]: t for t in threads}
    for t, rec in ((by_name["to-sub1"], "park-to-sub1"),
                   (by_name["to-sub2-sub3"], "park-to-sub2-sub3")):
        if recs[rec]["native_id"] != t["native_id"]:
            _truth.fail("%s parked on thread %d, not %d" % (rec, recs[rec]["native_id"],
                                                            t["native_id"]))
    rlock = {"object": recs["rlock-sub1-locker"]["object"],
             "holder": recs["park-sub1-locker"]["native_id"],
             "waiter": recs["park-sub1-worker"]["native_id"]}
    main = threading.current_thread()
    record_main(main, threads, [0] + list(ids), d, rlock); _truth.HELD.acquire()  # noqa: E702


def record_main(main, threads, ids, idle, rlock):
    frames = [dict(f, interpreter_id=0) for f in _truth.frames_from(sys._getframe(1))]
    _truth.write_truth({
        "scenario": "subinterpreters",
        "python": platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "gil_holder": None,
        "threads": [{"native_id": main.native_id, "thread_id": main.ident, "name": main.name,
                     "interpreter_id": 0, "frames": frames}] + threads,
        "interpreters": [{"id": i, "whence": whence(i)} for i in ids],
        "idle_interpreter": idle,
        "rlock": rlock,
    })


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "subinterp-records")
    os.makedirs(out_dir, exist_ok=True)
    ids = [create() for _ in range(4)]
    stop(out_dir, ids)


if __name__ == "__main__":
    main()
