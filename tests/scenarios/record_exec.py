"""A program that `exec`s while it is recorded (issue 52, item 6): the main thread spins in
``spin`` (called from ``before``) until the file ``exec-now`` appears beside the truth file
(the test makes it once a recording runs), then replaces itself (``os.execv``) with this same
script in mode ``after``, which spins in ``after`` and never signals. Same pid, same
executable: only the exec tells the two programs apart, and a recording must stop there (no
stack of ``after`` in it).

The truth has ``places``: the line of each spin and call, and the main thread's frames (its
``main`` on the line that writes the truth).
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

# How long each spin lasts between two looks for the file.
SPIN_SECONDS = 0.01


def spin(end):
    while time.monotonic() < end: pass  # spin-before  # noqa: E701


def before(go):
    while not os.path.exists(go):
        spin(time.monotonic() + SPIN_SECONDS)  # call-spin


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
                   for name in ("spin-before", "spin-after", "call-before", "call-spin")},
    })
    before(os.path.join(os.path.dirname(sys.argv[1]), "exec-now"))  # call-before
    os.execv(sys.executable, [sys.executable, here] + sys.argv[1:3] + ["after"])


if __name__ == "__main__":
    main()
