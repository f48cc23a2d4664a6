"""Builtins doing the user's work between Python frames (`--native` keeps their C frames):
`drive` sorts with a `functools.partial` key, so `sorted` (builtin_sorted, list.sort) calls
the partial, which calls `keyfunc`; `keyfunc` subscripts a dict subclass, whose C
`dict.__getitem__` (dict_subscript) calls `Missing.__missing__` in Python, where the thread
stops. Between each two Python frames sit those C functions and the interpreter's call
plumbing (eval loop, vectorcall dispatch), which `--native` hides.
"""

import functools
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


class Missing(dict):
    def __missing__(self, key):
        _truth.ready(); _truth.HELD.acquire()  # noqa: E702


def keyfunc(table, x):
    return table[x]


def drive():
    return sorted([1], key=functools.partial(keyfunc, Missing()))


def main():
    drive()


if __name__ == "__main__":
    main()
