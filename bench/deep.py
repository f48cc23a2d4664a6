"""Benchmark scenario: recurse N deep, then block forever inside a C call.

Usage: python3.11 deep.py N

`recurse` appears exactly N times on the stack. When the bottom is reached, "ready <pid>" is
written to stdout (a pipe held by the benchmark driver) and the process blocks in os.read() on
stdin, which the driver keeps open and never writes; EOF on stdin (driver gone) ends it.
"""

import os
import sys


def recurse(n):
    if n > 1:
        return recurse(n - 1)
    return block_forever()


def block_forever():
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    return os.read(0, 1)


def main():
    depth = int(sys.argv[1])
    if depth < 1:
        sys.exit("deep.py: N must be >= 1")
    sys.setrecursionlimit(depth + 1000)
    recurse(depth)


if __name__ == "__main__":
    main()
