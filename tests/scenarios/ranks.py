"""A launcher of N plain Python "ranks", as a distributed job's: every rank but one waits in
a collective (`allreduce`, even ranks on one line, odd ranks on another), the straggler is
still loading its batch (`load_batch`).

    python ranks.py TRUTH SIGNAL [N [STRAGGLER]]     the launcher (default 6 ranks, rank 3)
    python ranks.py TRUTH SIGNAL rank I STRAGGLER    one rank (started by the launcher)

Each rank records its own truth with ``_truth.ready()`` into ``TRUTH.rank<I>.json`` (its
SIGNAL is a plain file: the launcher waits for the truth file, then until the rank blocks in
``futex``, i.e. is back on its blocking line). The launcher then records its own stack, with
``ranks``: [{"rank", "pid", "straggler", "truth"}] holding every rank's truth, and signals the
harness. Ranks are the launcher's children, in its process group: the harness kills them with
it.

Every process (launcher and ranks) stops in ``_truth.HELD.acquire()`` on the innermost frame of
its truth (a Lock taken at import, by ``acquire()``: no thread's ``with`` block holds it), and
records so in its truth as ``waits``: {"kind": "lock", "object": id(HELD), "frame": 0}.
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

MAX_RANK_START_SECONDS = 20.0
# x86-64's futex system call: where HELD.acquire() blocks.
SYS_FUTEX = "202"
# What every process of the job waits on, at its stop (frame: the index in its truth's frames).
WAITS = {"kind": "lock", "object": id(_truth.HELD), "frame": 0}


def load_batch(step):
    _truth.ready(rank=RANK, step=step, waits=WAITS); _truth.HELD.acquire()  # noqa: E702


def allreduce(step):
    if RANK % 2 == 0:
        _truth.ready(rank=RANK, step=step, waits=WAITS); _truth.HELD.acquire()  # noqa: E702
    else:
        _truth.ready(rank=RANK, step=step, waits=WAITS); _truth.HELD.acquire()  # noqa: E702


def train_step(step, straggler):
    if straggler:
        load_batch(step)
    allreduce(step)


def rank_main(straggler):
    train_step(7, straggler)


def rank_paths(i):
    base = sys.argv[1]
    return base + ".rank%d.json" % i, base + ".rank%d.signal" % i


def blocked(pid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, pid)) as f:
            return f.read().split()[0] == SYS_FUTEX
    except (OSError, IndexError):
        return False


def start_ranks(n, straggler):
    procs = []
    for i in range(n):
        truth, signal = rank_paths(i)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), truth, signal, "rank", str(i),
             str(straggler)],
            stdin=subprocess.DEVNULL))
    ranks = []
    deadline = time.monotonic() + MAX_RANK_START_SECONDS
    for i, proc in enumerate(procs):
        truth, _ = rank_paths(i)
        while not (os.path.exists(truth) and blocked(proc.pid)):
            if proc.poll() is not None:
                _truth.fail("rank %d exited with %r" % (i, proc.returncode))
            if time.monotonic() > deadline:
                _truth.fail("rank %d not ready within %.0f s" % (i, MAX_RANK_START_SECONDS))
            time.sleep(0.01)
        with open(truth, encoding="utf-8") as f:
            ranks.append({"rank": i, "pid": proc.pid, "straggler": i == straggler,
                          "truth": json.load(f)})
    return ranks


def wait_for_ranks(n, straggler):
    ranks = start_ranks(n, straggler)
    _truth.ready(ranks=ranks, straggler=straggler, waits=WAITS); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    if sys.argv[3:4] == ["rank"]:
        RANK = int(sys.argv[4])
        rank_main(RANK == int(sys.argv[5]))
    else:
        n = int(sys.argv[3]) if len(sys.argv) > 3 else 6
        wait_for_ranks(n, int(sys.argv[4]) if len(sys.argv) > 4 else 3)
