"""One thread DEPTH Python frames deep (the argument after the harness's truth file and fifo;
default 20,000), blocked at the bottom: its
`py-bt` is over 1 MiB of text, which the lldb script writes straight to lldb's output.

3.11+ only: their Python-to-Python calls do not recurse in C (3.10's would overflow the C
stack)."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def recurse(n):
    if n > 1:
        return recurse(n - 1)
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702


def main():
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 20_000
    sys.setrecursionlimit(depth + 1000)
    recurse(depth)


if __name__ == "__main__":
    main()
