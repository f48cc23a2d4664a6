"""A `multiprocessing` job started with the spawn method: N ranks (default 5) meet at a shared
``multiprocessing.Barrier`` in ``all_reduce``; the straggler (default rank 2) is stalled in
``load_shard`` (``time.sleep``) and never arrives, so the others wait at the barrier for ever.

    python spawn_barrier.py TRUTH SIGNAL [N [STRAGGLER]]

Even ranks wait through ``wait_even``, odd ones through ``wait_odd``, both called on
``all_reduce``'s one line: below the frame where the straggler leaves them, the ranks' stacks
differ (issue 38: the majority is by the frame where the stacks part, not by whole stacks).

A spawned rank runs ``rank_main`` under multiprocessing's own frames (``spawn_main``,
``_bootstrap``, ``run``) and has the parent's ``sys.argv``, so it never touches the parent's
truth file or FIFO: its own truth goes to ``TRUTH.rank<I>.json``. It is written by a second
thread of the rank, ``recorder``, which samples the main thread's stack
(``sys._current_frames()``) until it is in its blocking call (the straggler's innermost frame
is ``load_shard``; a waiter's is in ``multiprocessing/synchronize.py``) and two samples
``SAMPLE_GAP_SECONDS`` apart agree, then writes both threads (its own on its blocking line) and
blocks. The parent waits for every rank's file and records its own stack, with ``ranks``:
[{"rank", "pid", "straggler", "truth"}] and ``tracker_pid``: multiprocessing's resource
tracker, a Python process of the job's tree that the Barrier's semaphores start and that
records no truth of its own.
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

MAX_RANK_START_SECONDS = 60.0
SAMPLE_GAP_SECONDS = 0.1


def load_shard(rank):
    time.sleep(3600)


def wait_even(barrier):
    barrier.wait()


def wait_odd(barrier):
    barrier.wait()


def all_reduce(rank, barrier):
    (wait_even if rank % 2 == 0 else wait_odd)(barrier)


def train_step(rank, straggler, barrier):
    if rank == straggler:
        load_shard(rank)
    all_reduce(rank, barrier)


def blocked_in(frames, straggler):
    """Whether the main thread's stack (innermost first) is in its blocking call."""
    if not frames:
        return False
    if straggler:
        return frames[0]["function"] == "load_shard"
    return frames[0]["file"].endswith(os.path.join("multiprocessing", "synchronize.py"))


def recorder(main, rank, straggler, path):
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    previous = None
    while True:
        frame = sys._current_frames().get(main.ident)
        current = _truth.frames_from(frame) if frame is not None else []
        if current == previous and blocked_in(current, straggler):
            break
        if time.monotonic() > deadline:
            sys.stderr.write("rank %d: main thread not blocked: %r\n" % (rank, current))
            os._exit(3)
        previous = current
        time.sleep(SAMPLE_GAP_SECONDS)
    entry = _truth._thread_entry(main, current)
    write_rank(path, rank, straggler, entry, sys._getframe(0)); _truth.HELD.acquire()  # noqa: E702


def write_rank(path, rank, straggler, main_entry, caller):
    me = _truth._thread_entry(threading.current_thread(), _truth.frames_from(caller))
    # What the main thread waits on, as ranks.py records it: the straggler sleeps in
    # load_shard, the others at the Barrier.
    truth = {"rank": rank, "pid": os.getpid(), "straggler": straggler,
             "threads": [main_entry, me], "waits": {"kind": "sleep" if straggler else "barrier"}}
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(truth, f)
    os.replace(path + ".tmp", path)


def rank_main(rank, straggler, barrier, path):
    main = threading.current_thread()
    threading.Thread(target=recorder, args=(main, rank, rank == straggler, path),
                     name="recorder", daemon=True).start()
    train_step(rank, straggler, barrier)


def rank_path(i):
    return sys.argv[1] + ".rank%d.json" % i


def wait_for_ranks(procs, straggler):
    ranks = []
    deadline = time.monotonic() + MAX_RANK_START_SECONDS
    for i, proc in enumerate(procs):
        while not os.path.exists(rank_path(i)):
            if proc.exitcode is not None:
                _truth.fail("rank %d exited with %r" % (i, proc.exitcode))
            if time.monotonic() > deadline:
                _truth.fail("rank %d not ready within %.0f s" % (i, MAX_RANK_START_SECONDS))
            time.sleep(0.01)
        with open(rank_path(i), encoding="utf-8") as f:
            ranks.append({"rank": i, "pid": proc.pid, "straggler": i == straggler,
                          "truth": json.load(f)})
    return ranks


def main():
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    straggler = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n)
    from multiprocessing import resource_tracker
    procs = [ctx.Process(target=rank_main, args=(i, straggler, barrier, rank_path(i)),
                         name="rank-%d" % i, daemon=True) for i in range(n)]
    for p in procs:
        p.start()
    ranks = wait_for_ranks(procs, straggler)
    extra = {"ranks": ranks, "straggler": straggler,
             "tracker_pid": resource_tracker._resource_tracker._pid}
    _truth.ready(**extra); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
