"""A launcher of 4 asyncio "ranks": in each, tasks `fetch-0`..`fetch-2` await an Event in
`fetch`; the straggler (rank 2) also has a task `retry` awaiting it in `retry`. Each rank's
main task waits on the Event in `main`.

    python async_ranks.py TRUTH SIGNAL                    the launcher
    python async_ranks.py TRUTH SIGNAL rank I STRAGGLER   one rank (started by the launcher)

A rank records its own truth into ``TRUTH.rank<I>.json`` from a thread (`recorder`, which
then blocks): once every task is suspended, each task's await chain as the coroutines show it
(``cr_await`` from the task's coroutine down to the first awaitable that is not a coroutine;
innermost first). The launcher waits for each truth file and for the rank's loop to block in
``epoll_wait``, then records its own stack with ``ranks``: [{"rank", "pid", "straggler",
"truth"}]. Ranks are in the launcher's process group: the harness kills them with it.
"""

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

RANKS = 4
STRAGGLER = 2
FETCHERS = 3
MAX_START_SECONDS = 20.0
# x86-64: epoll_wait, epoll_pwait (the selector's poll).
LOOP_BLOCKED_IN = {"232", "281"}


async def fetch(ev):
    await ev.wait()


async def retry(ev):
    await ev.wait()


def chain(task):
    """(function, file, line) of each coroutine the task is suspended in, innermost first."""
    frames = []
    coro = task.get_coro()
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        frame = coro.cr_frame
        frames.append({"function": _truth.code_name(frame.f_code),
                       "file": frame.f_code.co_filename, "line": frame.f_lineno})
        coro = coro.cr_await
    return frames[::-1]


def record(loop, rank):
    deadline = time.monotonic() + MAX_START_SECONDS
    while True:
        tasks = asyncio.all_tasks(loop)
        # Every task suspended in its Event.wait: its coroutine awaits a coroutine that awaits
        # a future.
        if len(tasks) >= 1 + FETCHERS and all(
                len(chain(t)) == 2 and t.get_coro().cr_await.cr_await is not None for t in tasks):
            break
        if time.monotonic() > deadline:
            _truth.fail("rank %d: tasks not suspended within %.0f s" % (rank, MAX_START_SECONDS))
        time.sleep(0.01)
    truth = {"pid": os.getpid(), "rank": rank,
             "tasks": sorted(({"name": t.get_name(), "id": id(t), "frames": chain(t)}
                              for t in tasks), key=lambda t: t["name"])}
    path = sys.argv[1]  # the launcher's TRUTH.rank<I>.json
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(truth, f)
    os.replace(path + ".tmp", path)
    _truth.HELD.acquire()


async def main(rank, straggler):
    ev = asyncio.Event()
    tasks = [asyncio.create_task(fetch(ev), name="fetch-%d" % i) for i in range(FETCHERS)]
    if straggler:
        tasks.append(asyncio.create_task(retry(ev), name="retry"))
    asyncio.current_task().set_name("main")
    threading.Thread(target=record, args=(asyncio.get_running_loop(), rank), name="recorder",
                     daemon=True).start()
    await ev.wait()


def rank_paths(i):
    return sys.argv[1] + ".rank%d.json" % i, sys.argv[1] + ".rank%d.signal" % i


def blocked(pid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, pid)) as f:
            return f.read().split()[0] in LOOP_BLOCKED_IN
    except (OSError, IndexError):
        return False


def start_ranks():
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *rank_paths(i), "rank",
                               str(i), str(STRAGGLER)], stdin=subprocess.DEVNULL)
             for i in range(RANKS)]
    deadline = time.monotonic() + MAX_START_SECONDS
    ranks = []
    for i, proc in enumerate(procs):
        truth, _ = rank_paths(i)
        while not (os.path.exists(truth) and blocked(proc.pid)):
            if proc.poll() is not None:
                _truth.fail("rank %d exited with %r" % (i, proc.returncode))
            if time.monotonic() > deadline:
                _truth.fail("rank %d not ready within %.0f s" % (i, MAX_START_SECONDS))
            time.sleep(0.01)
        with open(truth, encoding="utf-8") as f:
            ranks.append({"rank": i, "pid": proc.pid, "straggler": i == STRAGGLER,
                          "truth": json.load(f)})
    return ranks


def wait_for_ranks():
    ranks = start_ranks()
    _truth.ready(ranks=ranks); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    if sys.argv[3:4] == ["rank"]:
        asyncio.run(main(int(sys.argv[4]), sys.argv[4] == sys.argv[5]))
    else:
        wait_for_ranks()
