"""Deep recursion with a C function (map + sum) between every two levels.

Each level is two Python frames, ``descend`` and the lambda it maps, with ``sum`` and ``map``
(C) between the lambda and the next ``descend``, so every level starts a new eval loop.
The thread stops at the bottom.

3.12 counts 2 units of its fixed C recursion budget (1500) per eval-loop entry, so it cannot
go 1000 levels through C; there the recursion is LEVELS_312 deep. The truth records "levels".
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

LEVELS = 700 if sys.version_info[:2] == (3, 12) else 1000


def descend(n):
    if n == 0:
        _truth.ready(levels=LEVELS); _truth.HELD.acquire()  # noqa: E702
    return sum(map(lambda k: descend(k), [n - 1]))


def main():
    sys.setrecursionlimit(10 * LEVELS + 100)
    descend(LEVELS)


if __name__ == "__main__":
    main()
