"""A program that `exec`s while it is recorded (issue 52, item 6): the main thread spins in
``before`` for EXEC_AFTER_SECONDS after it signals ready, then replaces itself
(``os.execv``) with this same script in mode ``after``, which spins in ``after`` and never
signals. Same pid, same executable: only the exec tells the two programs apart, and a
recording must stop there (no stack of ``after`` in it).

The truth has ``places``: the (line) of each spin, and the main thread's frames below
``before`` (``main``, ``<module>``).
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

EXEC_AFTER_SECONDS = 1.5


def before(end):
    while time.monotonic() < end: pass  # spin-before  # noqa: E701


def after():
    while True: pass  # spin-after  # noqa: E701


def main():
    if sys.argv[3:] == ["after"]:
        after()
    here = os.path.abspath(__file__)
    _truth.write_truth({
        "scenario": "record_exec",
        "python": _truth.platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "running": True,
        "threads": [_truth._thread_entry(_truth.threading.current_thread(),
                                         _truth.frames_from(sys._getframe(0)))],
        "places": {name: _truth.source_line_of("# " + name, here)
                   for name in ("spin-before", "spin-after", "call-before")},
    })
    before(time.monotonic() + EXEC_AFTER_SECONDS)  # call-before
    os.execv(sys.executable, [sys.executable, here] + sys.argv[1:3] + ["after"])


if __name__ == "__main__":
    main()
