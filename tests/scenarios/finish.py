"""Python frames that return while a debugger watches (real gdb frames: py-finish, finish).

main calls middle once per step through map() (a C call), so middle is the entry frame of an
eval-loop call of its own and inner runs in that same call. Step 0 records the truth and blocks
in a C read of the FIFO `go` (in the working directory) until the debugger writes to it; steps
1 and 2 stop themselves with SIGTRAP (a debugger is attached by then). main then blocks for good.
"""

import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

os.mkfifo("go")
GO = os.open("go", os.O_RDWR)


def inner(step):
    if step == 0:
        _truth.ready(); os.read(GO, 1)  # noqa: E702
    else:
        os.kill(os.getpid(), signal.SIGTRAP)
    return step


def middle(step):
    got = inner(step)  # py-finish from inner stops here
    return got + 1


def main():
    for step in range(3):
        list(map(middle, [step]))  # finish / py-finish from middle stop here
    _truth.HELD.acquire()


if __name__ == "__main__":
    main()
