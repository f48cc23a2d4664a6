"""Named native frames between Python frames (issue 39): the main thread calls, through ctypes,
the entry of a library the test built (PYUNWIND_NAMES_LIB; its entry PYUNWIND_NAMES_ENTRY: the
C++ library tests/scenarios/native_names.cpp, or the Rust cdylib
tests/scenarios/native_names_rs), which calls down through its own functions to a ctypes
callback, ``blocked``, which records the truth and blocks: the stop is inside the library's
frames, with Python frames inside and around them.

The truth has ``library`` (the library's path).
"""

import ctypes
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

LIBRARY = os.environ["PYUNWIND_NAMES_LIB"]
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
# Over 1000: the C++ library calls back from `work::scaled`'s cold path.
ARGUMENT = 5000


def blocked(n):
    _truth.ready(library=LIBRARY); _truth.HELD.acquire()  # noqa: E702
    return n


def main():
    entry = getattr(ctypes.CDLL(LIBRARY), os.environ["PYUNWIND_NAMES_ENTRY"])
    entry.argtypes = [CALLBACK, ctypes.c_int]
    entry.restype = ctypes.c_int
    entry(CALLBACK(blocked), ARGUMENT)


if __name__ == "__main__":
    main()
