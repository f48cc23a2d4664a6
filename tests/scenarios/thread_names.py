"""Threads and their names (issue 38 item 4): Python threads with and without a `threading`
name, named by the system or not, and threads with no Python thread state at all.

- the main thread renames itself (``prctl(PR_SET_NAME)``) to ``names-main`` first: the process's
  name, which every thread created after it inherits, and which a core records
  (NT_PRPSINFO's ``pr_fname``);
- ``named-worker``: a ``threading.Thread`` that gives itself the system name ``os-named``;
- ``plain-worker`` and ``worker-with-a-long-name``: ``threading`` names only (3.14's
  ``threading`` gives each the system name itself, cut to 15 bytes; before 3.14 they inherit
  ``names-main``);
- a thread of ``_thread.start_new_thread``, which ``threading`` does not know (its ``threading``
  name is unset), named ``raw-py`` by the system;
- two C threads, made by libc's ``pthread_create`` (through ctypes) on libc's ``pause``, which
  never run Python: ``c-worker`` (named with ``pthread_setname_np``) and one left with the
  name it inherited.

Every thread waits for good: the Python threads in ``_truth.HELD.acquire()``, the C threads in
``pause()``. The truth has the Python threads as every scenario's (``name`` null for the
``_thread`` one), and ``comm``: each thread's system name as /proc shows it at the stop,
``set_names``: the names this program gave (so that a test sees /proc agree with them),
``native_only``: the C threads' ``native_id`` and ``thread_id`` (their ``pthread_t``), and
``main_name``.
"""

import _thread
import ctypes
import os
import platform
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

# prctl(2): PR_SET_NAME names the calling thread (at most 15 bytes, TASK_COMM_LEN - 1).
PR_SET_NAME = 15
MAIN_NAME = "names-main"
LIBC = ctypes.CDLL(None, use_errno=True)
# The names this program gives, by native id.
SET_NAMES = {}


def set_os_name(name):
    if LIBC.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()), 0, 0, 0) != 0:
        _truth.fail("prctl(PR_SET_NAME, %r): errno %d" % (name, ctypes.get_errno()))
    SET_NAMES[threading.get_native_id()] = name


def named_worker(started):
    set_os_name("os-named")
    started.set(); _truth.HELD.acquire()  # noqa: E702


def plain_worker(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


def long_worker(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


RAW = {}


def raw_thread(started):
    # threading.get_native_id is _thread's: it does not make the thread known to threading.
    set_os_name("raw-py")
    RAW["native_id"], RAW["ident"] = threading.get_native_id(), _thread.get_ident()
    started.set(); _truth.HELD.acquire()  # noqa: E702


def tasks():
    return set(int(t) for t in os.listdir("/proc/self/task"))


def start_c_thread(name):
    """A thread that runs libc's pause() and never Python; its LWP is the task that appears,
    its pthread_t what pthread_create gives. Named with pthread_setname_np unless `name` is
    None."""
    before = tasks()
    handle = ctypes.c_ulong()
    pause = ctypes.cast(LIBC.pause, ctypes.c_void_p)
    rc = LIBC.pthread_create(ctypes.byref(handle), None, pause, None)
    if rc != 0:
        _truth.fail("pthread_create: %d" % rc)
    new = tasks() - before
    if len(new) != 1:
        _truth.fail("pthread_create made tasks %r" % sorted(new))
    (tid,) = new
    if name is not None:
        rc = LIBC.pthread_setname_np(ctypes.c_ulong(handle.value), ctypes.c_char_p(name.encode()))
        if rc != 0:
            _truth.fail("pthread_setname_np(%r): %d" % (name, rc))
        SET_NAMES[tid] = name
    return {"native_id": tid, "thread_id": handle.value}


def comm_of_every_thread():
    out = {}
    for tid in sorted(tasks()):
        with open("/proc/self/task/%d/comm" % tid, encoding="utf-8", errors="replace") as f:
            out[str(tid)] = f.read().rstrip("\n")
    return out


def record(native_only):
    """The truth, as _truth.ready() writes it, with the `_thread` thread (which
    `_truth.collect` refuses: threading does not know it) and the names."""
    me = threading.current_thread()
    threads = [_truth._thread_entry(me, _truth.frames_from(sys._getframe(1)))]
    known = {t.ident: t for t in threading.enumerate()}
    others = []
    for ident, frames in _truth.settled_thread_stacks().items():
        if ident in known:
            others.append(_truth._thread_entry(known[ident], frames))
        elif ident == RAW["ident"]:
            others.append({"native_id": RAW["native_id"], "thread_id": ident, "name": None,
                           "frames": frames})
        else:
            _truth.fail("thread %d has a frame but is neither threading's nor ours" % ident)
    others.sort(key=lambda e: e["name"] or "")
    why_helpers.wait_blocked(os.getpid(), [t["native_id"] for t in native_only], "C threads")
    comm = comm_of_every_thread()
    for tid, name in SET_NAMES.items():
        if comm.get(str(tid)) != name:
            _truth.fail("thread %d is named %r, not %r" % (tid, comm.get(str(tid)), name))
    _truth.write_truth({
        "scenario": "thread_names",
        "python": platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "gil_holder": None,
        "threads": threads + others,
        "native_only": native_only,
        "comm": comm,
        "set_names": {str(k): v for k, v in SET_NAMES.items()},
        "main_name": MAIN_NAME,
    })


def main():
    set_os_name(MAIN_NAME)
    _truth.start_threads({"named-worker": named_worker, "plain-worker": plain_worker,
                          "worker-with-a-long-name": long_worker})
    started = threading.Event()
    _thread.start_new_thread(raw_thread, (started,))
    if not started.wait(_truth.MAX_START_SECONDS):
        _truth.fail("the _thread thread did not start")
    native_only = [start_c_thread("c-worker"), start_c_thread(None)]
    record(native_only); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
