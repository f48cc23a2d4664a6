"""A gunicorn-style pre-fork server: the parent listens on a socket, forks 4 workers with
`os.fork()` and waits in `arbiter_loop`; the workers wait in `accept4` (in `worker_loop`),
but worker 1, which is busy with a request (`handle`), waits on a lock.

Forked workers record their own stack on their blocking line into ``TRUTH.worker<I>.json``
(the parent's argv paths are not theirs). The parent waits until every worker's file is there
and the worker is blocked in its system call (`accept`/`accept4`, or `futex` for the busy one),
then records its own stack with ``workers``: [{"worker", "pid", "busy", "truth"}].
"""

import json
import os
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

WORKERS = 4
BUSY = 1
MAX_START_SECONDS = 20.0
# x86-64 system call numbers: accept, accept4 (socket.accept), futex (HELD.acquire()).
BLOCKED_IN = {"43", "288", "202"}


def record(worker, caller):
    truth = {"pid": os.getpid(), "worker": worker, "threads": [
        _truth._thread_entry(threading.current_thread(), _truth.frames_from(caller))]}
    path = sys.argv[1] + ".worker%d.json" % worker
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(truth, f)
    os.replace(path + ".tmp", path)


def handle(worker):
    record(worker, sys._getframe(0)); _truth.HELD.acquire()  # noqa: E702


def worker_loop(worker, listener):
    if worker == BUSY:
        handle(worker)
    while True:
        # _accept(), the C method socket.accept() calls: no Python frame above this one.
        record(worker, sys._getframe(0)); listener._accept()  # noqa: E702


def spawn(worker, listener):
    pid = os.fork()
    if pid == 0:
        try:
            worker_loop(worker, listener)
        finally:
            os._exit(0)
    return pid


def blocked(pid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, pid)) as f:
            return f.read().split()[0] in BLOCKED_IN
    except (OSError, IndexError):
        return False


def wait_for_workers(pids):
    deadline = time.monotonic() + MAX_START_SECONDS
    workers = []
    for worker, pid in enumerate(pids):
        path = sys.argv[1] + ".worker%d.json" % worker
        while not (os.path.exists(path) and blocked(pid)):
            if time.monotonic() > deadline:
                _truth.fail("worker %d not blocked within %.0f s" % (worker, MAX_START_SECONDS))
            time.sleep(0.01)
        with open(path, encoding="utf-8") as f:
            workers.append({"worker": worker, "pid": pid, "busy": worker == BUSY,
                            "truth": json.load(f)})
    return workers


def arbiter_loop(listener):
    pids = [spawn(worker, listener) for worker in range(WORKERS)]
    workers = wait_for_workers(pids)
    _truth.ready(workers=workers); _truth.HELD.acquire()  # noqa: E702


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    arbiter_loop(listener)


if __name__ == "__main__":
    main()
