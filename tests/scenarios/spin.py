"""Threads over time, for `pid --why --for` (issue 52): one spinning, one making progress, one
blocked.

- "spinner" spins on a flag nobody sets, ``while not FLAG: pass`` on one line: on CPU, its
  stack never moves;
- "worker" makes progress: it hashes a large buffer in ``hash_a`` then in ``hash_b``, sleeping
  a little after each (hashlib releases the GIL over a large buffer, so the spinner keeps
  most of it and stays on CPU);
- "blocked" waits in ``LOCK.acquire()`` for a Lock the main thread holds;
- the main thread records the truth and blocks in ``_truth.HELD.acquire()``.

The truth has every thread (name, native_id; the frames of those that stand still, the
spinner's as ``sys._current_frames()`` shows it spinning) and ``worker_places``: the
(function, line) pairs the worker's innermost frame can be at.
"""

import hashlib
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

FLAG = False
LOCK = threading.Lock()
DATA = b"x" * (1 << 22)
PAUSE_SECONDS = 0.002


def spinner(started):
    started.set()
    while not FLAG: pass  # noqa: E701  spin-line


def hash_a():
    return hashlib.sha256(DATA).digest()  # hash-a


def hash_b():
    return hashlib.sha256(DATA).digest()  # hash-b


def worker(started):
    started.set()
    while True:
        hash_a()  # call-a
        time.sleep(PAUSE_SECONDS)  # sleep-a
        hash_b()  # call-b
        time.sleep(PAUSE_SECONDS)  # sleep-b


def blocked(started):
    started.set(); LOCK.acquire()  # noqa: E702


def stands_in(name, function):
    """The frames of thread ``name`` once its innermost frame runs ``function``."""
    ident = next(t.ident for t in threading.enumerate() if t.name == name)
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while True:
        frame = sys._current_frames().get(ident)
        if frame is not None and frame.f_code.co_name == function:
            return _truth.frames_from(frame)
        if time.monotonic() > deadline:
            _truth.fail("%s never reached %s" % (name, function))
        time.sleep(0.005)


def record(caller):
    here = os.path.abspath(__file__)
    by_name = {t.name: t for t in threading.enumerate()}
    stands = {"spinner": stands_in("spinner", "spinner"), "blocked": stands_in("blocked", "blocked"),
              "worker": []}
    threads = [_truth._thread_entry(threading.current_thread(), _truth.frames_from(caller))]
    threads += [_truth._thread_entry(by_name[n], stands[n]) for n in sorted(stands)]
    places = [(fn, _truth.source_line_of("# " + marker, here))
              for fn, marker in [("hash_a", "hash-a"), ("hash_b", "hash-b"),
                                 ("worker", "call-a"), ("worker", "sleep-a"),
                                 ("worker", "call-b"), ("worker", "sleep-b")]]
    return {
        "scenario": "spin",
        "python": _truth.platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": _truth.FREE_THREADED,
        "running": True,
        "threads": threads,
        "worker_places": places,
    }


def main():
    LOCK.acquire()
    _truth.start_threads({"spinner": spinner, "worker": worker, "blocked": blocked})
    _truth.write_truth(record(sys._getframe(0))); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
