"""A pure-Python hot loop that never blocks, for attaching to a running process.

The truth is taken on entry to the loop: every frame but the innermost stays as recorded;
the innermost is ``spin`` or ``step`` on whatever line it happens to be. "running": true
says so.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def step(total, i):
    total += i * i
    if total > 1_000_000_007:
        total %= 1_000_000_007
    return total


def spin():
    _truth.ready(running=True)
    total = 0
    i = 0
    while True:
        total = step(total, i)
        i += 1


def main():
    spin()


if __name__ == "__main__":
    main()
