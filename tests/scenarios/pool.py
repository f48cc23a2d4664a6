"""A `multiprocessing.Pool` of 4 forked workers, each blocked in its task: three in
`handle_request`, one (task 2) in `handle_slow`. The parent waits in `wait_for_pool`.

Workers are forked, so `_truth.ready()` (which writes to the parent's argv paths) is not theirs:
each task records its own stack on its blocking line into ``TRUTH.task<I>.json`` (``HELD`` was
acquired before the fork, so it blocks the workers too). The parent waits until every task's
file is there and its worker is blocked in ``futex``, then records its main thread (its pool
threads move: they are not in the truth) with ``tasks``: [{"task", "pid", "truth"}].

Every process also counts its own threads: ``native_ids``, the native ids of the threads
``threading`` knows (the parent's main thread and the Pool's handler threads; a worker's one
thread), checked against the kernel's list of its tasks (/proc/self/task) so that no thread
goes uncounted.
"""

import json
import multiprocessing
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

WORKERS = 4
SLOW_TASK = 2
MAX_START_SECONDS = 20.0
SYS_FUTEX = "202"  # x86-64: where HELD.acquire() blocks


def own_threads():
    """The native ids of this process's threads, as threading counts them; the kernel's list
    must be the same."""
    ids = sorted(t.native_id for t in threading.enumerate())
    tasks = sorted(int(t) for t in os.listdir("/proc/self/task"))
    if ids != tasks:
        _truth.fail("threading knows threads %r, the kernel %r" % (ids, tasks))
    return ids


def record(task, caller):
    truth = {"pid": os.getpid(), "task": task, "native_ids": own_threads(), "threads": [
        _truth._thread_entry(threading.current_thread(), _truth.frames_from(caller))]}
    path = sys.argv[1] + ".task%d.json" % task
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(truth, f)
    os.replace(path + ".tmp", path)


def handle_slow(task):
    record(task, sys._getframe(0)); _truth.HELD.acquire()  # noqa: E702


def handle_request(task):
    record(task, sys._getframe(0)); _truth.HELD.acquire()  # noqa: E702


def task_main(task):
    if task == SLOW_TASK:
        handle_slow(task)
    handle_request(task)


def blocked(pid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, pid)) as f:
            return f.read().split()[0] == SYS_FUTEX
    except (OSError, IndexError):
        return False


def wait_for_tasks():
    deadline = time.monotonic() + MAX_START_SECONDS
    tasks = []
    for task in range(WORKERS):
        path = sys.argv[1] + ".task%d.json" % task
        while True:
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    truth = json.load(f)
                if blocked(truth["pid"]):
                    break
            if time.monotonic() > deadline:
                _truth.fail("task %d not blocked within %.0f s" % (task, MAX_START_SECONDS))
            time.sleep(0.01)
        tasks.append({"task": task, "pid": truth["pid"], "truth": truth})
    return tasks


def wait_for_pool(pool):
    pool.map_async(task_main, range(WORKERS), chunksize=1)
    tasks = wait_for_tasks()
    truth = {"scenario": "pool", "python": _truth.platform.python_version(), "pid": os.getpid(),
             "tasks": tasks, "slow_task": SLOW_TASK, "native_ids": own_threads()}
    truth["threads"] = [_truth._thread_entry(threading.current_thread(), _truth.frames_from(sys._getframe(0)))]; _truth.write_truth(truth); _truth.HELD.acquire()  # noqa: E501,E702


def main():
    # fork on every version (3.14 defaults to forkserver): the workers are the parent's
    # children, so `--children` of the parent finds them.
    pool = multiprocessing.get_context("fork").Pool(WORKERS)
    wait_for_pool(pool)


if __name__ == "__main__":
    main()
