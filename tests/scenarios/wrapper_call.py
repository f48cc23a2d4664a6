"""A Python frame calling a method-wrapper: MyList.__init__ calls list.__init__ through a
super object (a method-wrapper, run by CPython's `wrapper_call`), which iterates a generator
that stops inside `time.sleep`. libpython's py-bt shows
`<method-wrapper '__init__' of MyList object at 0x…>` between the generator's frame and
`MyList.__init__`.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

STOP_SECONDS = 3600


class MyList(list):
    def __init__(self, items):
        # `super(*[])`, as CPython's test_gdb: a plain call, so the attribute is a bound
        # method-wrapper (3.12's LOAD_SUPER_ATTR would call the slot wrapper unbound).
        super(*[]).__init__(items)


def items():
    _truth.ready(); time.sleep(STOP_SECONDS)  # noqa: E702
    yield 1


def main():
    MyList(items())


if __name__ == "__main__":
    main()
