"""A plain call chain run with perf trampolines on (PYTHONPERFSUPPORT=1 or
PYTHON_PERF_JIT_SUPPORT=1 in the environment, as -X perf / -X perf_jit): each Python call goes
through a trampoline copy. outer -> middle x3 -> leaf, which records the truth and blocks."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def leaf():
    _truth.ready(perf=sys.is_stack_trampoline_active()); _truth.HELD.acquire()  # noqa: E702


def middle(depth):
    if depth:
        return middle(depth - 1)
    return leaf()


def outer():
    return middle(2)


if __name__ == "__main__":
    outer()
