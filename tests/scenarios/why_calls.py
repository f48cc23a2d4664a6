"""Native waits name the call being made (issue 49 item 9), not a callable that only sits on
the value stack:

- ``sleeper`` calls ``time.sleep`` inside ``with lock:`` (the lock's bound ``__exit__``, or on
  3.14+ its ``__exit__`` and the lock, sit below the call for the ``with``): a ``sleep`` wait;
- ``pauser`` calls ``signal.pause()`` inside ``with rlock:``: a ``native`` wait in
  ``signal.pause``;
- ``ctyper`` calls libc's ``pause`` through a ``ctypes`` function pointer
  (``ctypes.CDLL("libc.so.6").pause``): a ``native`` wait named ``pause (libc.so.6)``.

The main thread records the truth and blocks in ``_truth.HELD``. The truth has each thread's
native id under its name, and ``pause``: ``signal.pause`` as native waits name it.
"""

import ctypes
import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

LOCK = threading.Lock()
RLOCK = threading.RLock()
LIBC = ctypes.CDLL("libc.so.6")


def sleeper(started):
    with LOCK:
        started.set(); time.sleep(3600)  # noqa: E702


def pauser(started):
    with RLOCK:
        started.set(); signal.pause()  # noqa: E702


def ctyper(started):
    started.set(); LIBC.pause()  # noqa: E702


def main():
    names = {"sleeper": sleeper, "pauser": pauser, "ctyper": ctyper}
    _truth.start_threads(names)
    ids = {t.name: t.native_id for t in threading.enumerate() if t.name in names}
    why_helpers.wait_blocked(os.getpid(), list(ids.values()))
    # A module's builtin as docs/report.md names it: its module's name and its own.
    pause = "%s.%s" % (signal.pause.__module__, signal.pause.__name__)
    _truth.ready(pause=pause, **ids); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
