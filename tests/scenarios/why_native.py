"""A thread blocked in native code (issue 37): ``parker`` calls ``pyunwind_blocker.park(7)``, a
C++ extension function (tests/scenarios/why_native_ext.cpp, built by the test into the directory
named by PYUNWIND_BLOCKER_DIR) that releases the GIL and waits for good in
``std::condition_variable::wait`` under ``blocker::park(int)``. No Python-level wait explains it.
The main thread records the truth and blocks in ``_truth.HELD``.

The truth has ``parker`` (its native id) and ``function`` (the extension function's module and
name).
"""

import os
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ["PYUNWIND_BLOCKER_DIR"])
import _truth  # noqa: E402
import why_helpers  # noqa: E402
import pyunwind_blocker  # noqa: E402


def parker(started):
    started.set(); pyunwind_blocker.park(7)  # noqa: E702


def main():
    _truth.start_threads({"parker": parker})
    (thread,) = [t for t in threading.enumerate() if t.name == "parker"]
    why_helpers.wait_blocked(os.getpid(), [thread.native_id])
    # A module's builtin as docs/report.md names it: its module's name and its own.
    park = pyunwind_blocker.park
    truth = dict(parker=thread.native_id, function="%s.%s" % (park.__module__, park.__name__),
                 module_file=pyunwind_blocker.__file__)
    _truth.ready(**truth); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
