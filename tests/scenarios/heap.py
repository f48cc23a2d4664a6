"""A heap of every kind `--heap` counts, and the program's own record of it.

Classes with a `__dict__` (`Order`, values in the instance or a split table) and with
`__slots__` (`Slotted`), a `bytes` subclass (`Blob`), reference cycles (`Node`), a dict of
300,000 entries, big lists of bytes, a tuple, a set, a frozenset, a deque, strings of every
kind (ASCII, latin-1, UCS-2, UCS-4, interned), a multi-digit int, and a str that only a frame's
local holds.

The truth's `heap` has:
- `types`: for the scenario's own classes, `{type: [count, bytes]}` from `gc.get_objects()`
  (they are GC-tracked) and `sys.getsizeof`;
- `objects`: `{id: [type, getsizeof, len]}` for the big objects, each over 100 KB, so that
  they are among the largest of the process;
- `at_least`: `{type: [count, bytes]}` of the plain objects it holds (bytes, str, int): the
  process holds more of them than the scenario made.
"""

import collections
import gc
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


class Order:
    def __init__(self, n):
        self.number = n
        self.note = "order %d" % n


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, n):
        self.a = n * 1000003
        self.b = ("slot", n)


class Blob(bytes):
    pass


class Node:
    def __init__(self):
        self.other = self


def name_of(cls):
    """The type's name as Python prints it: `module.Qualname`, builtins without a module."""
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def sized(o):
    try:
        return len(o)
    except TypeError:
        return None


ORDERS = [Order(i) for i in range(10000)]
ORDERS[5].__dict__  # one materialized __dict__
ORDERS[6].extra = 1  # one that leaves the shared keys
SLOTTED = [Slotted(i) for i in range(10000)]
BLOBS = [Blob(b"%d" % i * 20) for i in range(3000)]
PLAIN_BYTES = [b"x" * (i % 500) + b"%d" % i for i in range(20000)]
NODES = []
for _ in range(1000):
    a, b = Node(), Node()
    a.other, b.other = b, a
    NODES.append(a)
    del a, b
BIG_DICT = {"key%d" % i: i * 7 for i in range(300000)}
BIG_BYTES = [b"%d" % i * (100000 // len(b"%d" % i)) + bytes(i) for i in range(1, 6)]
BIG_LIST = list(range(20000, 40000))
BIG_TUPLE = tuple(range(40000, 60000))
BIG_SET = {"member%d" % i for i in range(10000)}
BIG_FROZENSET = frozenset(range(100000, 110000))
BIG_DEQUE = collections.deque(range(200000, 230000))
TEXT_ASCII = "a" * 150001
TEXT_LATIN1 = "\xe9" * 150002
TEXT_UCS2 = "\u65e5" * 150003
TEXT_UCS4 = "\U0001d11e" * 150004
TEXT_INTERNED = sys.intern("interned" * 20001)
BIG_INT = 7**200000
BIG = [BIG_DICT, BIG_LIST, BIG_TUPLE, BIG_SET, BIG_FROZENSET, BIG_DEQUE, TEXT_ASCII,
       TEXT_LATIN1, TEXT_UCS2, TEXT_UCS4, TEXT_INTERNED, BIG_INT] + BIG_BYTES


def record():
    gc.collect()
    own = (Order, Slotted, Blob, Node)
    types = {name_of(c): [0, 0] for c in own}
    for o in gc.get_objects():
        if type(o) in own:
            t = types[name_of(type(o))]
            t[0] += 1
            t[1] += sys.getsizeof(o)
    objects = {str(id(o)): [name_of(type(o)), sys.getsizeof(o), sized(o)] for o in BIG}
    objects[str(id(BIG_INT))][2] = None
    at_least = {"bytes": [0, 0], "str": [0, 0], "int": [0, 0]}
    seen = set()
    for o in PLAIN_BYTES + BIG_BYTES + list(BIG_SET) + list(BIG_DICT) + BIG_LIST:
        if id(o) not in seen:
            seen.add(id(o))
            t = at_least[name_of(type(o))]
            t[0] += 1
            t[1] += sys.getsizeof(o)
    return {"types": types, "objects": objects, "at_least": at_least}


def hold():
    # A str only this frame holds (a local, not in any container).
    only_here = "L" * 120000 + "!"
    HEAP["objects"][str(id(only_here))] = ["str", sys.getsizeof(only_here), len(only_here)]
    _truth.ready(heap=HEAP); _truth.HELD.acquire()  # noqa: E702


HEAP = record()
hold()
