"""Python frames calling a C function: main -> outer -> call_c, which stops inside
`time.sleep` (a builtin function of the `time` module). libpython's py-bt shows the C function
above `call_c`: `<built-in method sleep of module object at remote 0x…>`.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

STOP_SECONDS = 3600


def call_c(seconds):
    _truth.ready(); time.sleep(seconds)  # noqa: E702


def outer():
    call_c(STOP_SECONDS)


def main():
    outer()


if __name__ == "__main__":
    main()
