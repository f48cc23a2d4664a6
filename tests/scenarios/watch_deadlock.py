"""A program that makes progress for a few seconds and then deadlocks, for `pyunwind watch`
(issue 52): the watchdog must say nothing before the deadlock and report it once after.

- "left" and "right" take the Locks ``A`` then ``B`` in a loop, each in ``with`` blocks, and
  sleep a little between rounds (progress); after PROGRESS seconds (``sys.argv[3]``, default
  4) "left" takes ``A`` then ``B`` and "right" ``B`` then ``A``: a barrier makes each hold its
  first lock before it enters the ``with`` of its second, where both block for good;
- "poller" polls a flag and sleeps 50 ms between looks, forever: its stack stays on one line
  but it runs every 50 ms, so it never stalls;
- "sleeper" sleeps in one ``time.sleep`` of an hour: it does not run at all, on one line, but
  a sleep the program asked for ends by itself: never a stall;
- "computer" computes (pure Python) until the deadlock begins, then ends; its stack changes
  from one second to the next;
- the main thread records the truth, signals ready, then polls until both deadlocked threads
  have recorded where they block, writes that record (``deadlock.json`` beside the truth
  file), and sleeps in a loop (it runs every 200 ms: never stalled).

The truth (at ready) has the threads' names and native ids, ``objects`` (``id()`` of ``A`` and
``B``) and ``lines``: the line of each thread's blocking ``with`` and of the poller's and the
sleeper's sleeps.
``deadlock.json``: ``began`` (``time.time()`` just before the later of the two blocking
``with``s) and, for "left" and "right", the function and line they block at.
"""

import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

PROGRESS_SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 4.0
POLL_SECONDS = 0.05
A = threading.Lock()
B = threading.Lock()
BOTH = threading.Barrier(2)
STOP = threading.Event()
BLOCKS = {}
START = time.monotonic()
COUNTS = {"rounds": 0, "sums": 0}


def progress():
    """Rounds of taking A then B, until the deadlock's time."""
    while time.monotonic() - START < PROGRESS_SECONDS:
        with A:
            with B:
                COUNTS["rounds"] += 1
        time.sleep(0.01)


def left(started):
    started.set()
    progress()
    with A:
        BOTH.wait()
        BLOCKS["left"] = time.time()
        with B:  # left blocks
            pass


def right(started):
    started.set()
    progress()
    with B:
        BOTH.wait()
        BLOCKS["right"] = time.time()
        with A:  # right blocks
            pass


def poller(started):
    started.set()
    while not STOP.is_set():
        time.sleep(POLL_SECONDS)  # poller sleeps


def sleeper(started):
    started.set()
    time.sleep(3600)  # sleeper sleeps


def compute(depth):
    if depth > 0:
        return compute(depth - 1)
    return sum(i * i for i in range(2000))


def computer(started):
    """Its stack's depth follows the clock, a step every tenth of a second over 7 depths: two
    samples about a second apart never see the same stack. (A loop on one line would be seen
    at one place by every sample, as a spin is: progress a stack cannot show.)"""
    started.set()
    while time.monotonic() - START < PROGRESS_SECONDS:
        COUNTS["sums"] += compute(int(time.monotonic() * 10) % 7)


def main():
    here = os.path.abspath(__file__)
    _truth.start_threads({"left": left, "right": right, "poller": poller,
                          "sleeper": sleeper, "computer": computer})
    threads = [_truth._thread_entry(t, []) for t in threading.enumerate()]
    # "# " apart from the marker's words: this line must not hold the marker itself.
    lines = {name: _truth.source_line_of("# " + marker, here)
             for name, marker in [("left", "left blocks"), ("right", "right blocks"),
                                  ("poller", "poller sleeps"), ("sleeper", "sleeper sleeps")]}
    _truth.write_truth({
        "scenario": "watch_deadlock",
        "python": _truth.platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "running": True,
        "threads": threads,
        "objects": {"A": id(A), "B": id(B)},
        "lines": lines,
        "progress_seconds": PROGRESS_SECONDS,
    })
    while len(BLOCKS) < 2:
        time.sleep(POLL_SECONDS)
    record = {"began": max(BLOCKS.values()),
              "blocks": {name: {"function": name, "line": lines[name]} for name in BLOCKS}}
    path = os.path.join(os.path.dirname(sys.argv[1]), "deadlock.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)
    while True:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
