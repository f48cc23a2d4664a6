"""Benchmark scenario for the JIT unwinder: a stack deep in native AND Python frames.

Usage: python jit_deep.py N

Each of the N levels of `recurse` calls the next through `map()` (a C iterator), so every level
adds native frames (map_next, vectorcall plumbing, an eval-loop call) besides its Python frame.
At the bottom it writes "ready <pid>" to stdout and blocks reading stdin.
"""

import os
import sys


def recurse(n):
    if n > 1:
        return list(map(recurse, [n - 1]))
    sys.stdout.write("ready %d\n" % os.getpid())
    sys.stdout.flush()
    return os.read(0, 1)


if __name__ == "__main__":
    depth = int(sys.argv[1])
    sys.setrecursionlimit(depth * 4 + 1000)
    recurse(depth)
