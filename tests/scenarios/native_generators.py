"""Generators, coroutines and C iterators resumed from C between Python frames (`--native`
keeps the frames that run them, as pystack shows them): a coroutine driven by `send` runs a
function that takes `next()` of a generator, which sorts a generator expression; each of its
items is a `filter` over a Python predicate, which calls `map` over a Python function, where
the thread stops.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def leaf(x):
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702


def keep(x):
    return list(map(leaf, [x]))


def item(x):
    return list(filter(keep, [x]))


def numbers():
    yield sorted(item(x) for x in [1])


def by_next():
    return next(numbers())


async def coro():
    return by_next()


def drive():
    coro().send(None)


def main():
    drive()


if __name__ == "__main__":
    main()
