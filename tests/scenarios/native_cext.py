"""A C extension calling back into Python (`--native`): main -> through_c -> the extension's
`call` (C, built by the test from tests/scenarios/native_cext.c, found in the directory named
by PYUNWIND_CEXT_DIR) -> callback, which stops.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ["PYUNWIND_CEXT_DIR"])
import _truth  # noqa: E402
import pyunwind_cext  # noqa: E402


def callback():
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702


def through_c():
    pyunwind_cext.call(callback)


def main():
    through_c()


if __name__ == "__main__":
    main()
