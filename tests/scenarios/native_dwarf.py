"""A C library with DWARF calling back into Python (`--native`): main -> through_c -> the
library's `dwarf_call` (C, with `call_inlined` inlined in it; built by the test from
tests/scenarios/native_dwarf.c, its path in PYUNWIND_DWARF_LIB), called through ctypes ->
callback, which stops.
"""

import ctypes
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

LIB = ctypes.CDLL(os.environ["PYUNWIND_DWARF_LIB"])
CALLBACK = ctypes.CFUNCTYPE(None)


def callback():
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702


C_CALLBACK = CALLBACK(callback)


def through_c():
    LIB.dwarf_call(C_CALLBACK)


def main():
    through_c()


if __name__ == "__main__":
    main()
