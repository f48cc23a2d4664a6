"""A heap of every kind `--heap` counts, and the program's own record of it.

Classes with a `__dict__` (`Order`, values in the instance or a split table) and with
`__slots__` (`Slotted`), a `bytes` subclass (`Blob`), reference cycles (`Node`), a dict of
300,000 entries, big lists of bytes, a tuple, a set, a frozenset, a deque, strings of every
kind (ASCII, latin-1, UCS-2, UCS-4, interned), a multi-digit int, a str that only a frame's
local holds, and the objects whose `__sizeof__` is their own: a bytearray (over-allocated), a
code object (3.10: with its opcache, after 1,100 calls), a frame, a suspended generator and
coroutine (3.11+: their frames' slots); and a str and a bytes that only a function holds (a
constant of its code, a default of its own).

The truth's `heap` has:
- `types`: for the scenario's own classes, `{type: [count, bytes]}` from `gc.get_objects()`
  (they are GC-tracked) and `sys.getsizeof`, and the same for every generator and coroutine of
  the process (GC-tracked too);
- `objects`: `{id: [type, getsizeof, len]}` for the big objects, each over 100 KB, so that
  they are among the largest of the process (a generator's or coroutine's getsizeof is that big
  from 3.11 only, where its frame is in it: on 3.10 the type totals check them);
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
BIG_BYTEARRAY = bytearray(b"z" * 150000)
BIG_BYTEARRAY += b"!" * 10  # now over-allocated: getsizeof counts ob_alloc, not len
# 40,000 lines of LOAD_GLOBAL: a big code object on every version; 1,100 calls make 3.10 give
# it an opcache (co_opcache_map, one byte per code unit, and 254 entries).
_HOT = "def hot(go=False):\n    if not go:\n        return 0\n" + "    x = G\n" * 40000
# 20,000 locals: a frame, a generator's and a coroutine's slots are over 160 KB.
_LOCALS = "".join("    v%d = n\n" % i for i in range(20000))
_WAIT = "class Wait:\n    def __await__(self):\n        yield 1\n"
# A str only a code object's constants hold, and a bytes only a function's defaults hold.
_CONST = "def const():\n    return %r\n" % ("C" * 150000)
_DEFAULT = "def default(x=b'D' * 150000):\n    return x\n"
_NS = {"G": 1, "sys": sys}
exec(_HOT + "def frame(n):\n" + _LOCALS + "    return sys._getframe()\n"
     + "def gen(n):\n" + _LOCALS + "    yield n\n" + _WAIT
     + "async def coro(n):\n" + _LOCALS + "    await Wait()\n" + _CONST + _DEFAULT, _NS)
for _ in range(1100):
    _NS["hot"]()
HOT_CODE = _NS["hot"].__code__
BIG_FRAME = _NS["frame"](1)
BIG_GEN = _NS["gen"](1)
next(BIG_GEN)
BIG_CORO = _NS["coro"](1)
BIG_CORO.send(None)
# Recorded here, then let go of: only the functions (in _NS) hold them.
ONLY_IN_FUNCTIONS = {
    str(id(o)): ["str" if isinstance(o, str) else "bytes", sys.getsizeof(o), len(o)]
    for o in ([c for c in _NS["const"].__code__.co_consts if isinstance(c, str) and len(c) > 1000]
              + [_NS["default"].__defaults__[0]])}
del _NS["hot"], _NS["frame"], _NS["gen"], _NS["coro"], _HOT, _LOCALS, _WAIT, _CONST, _DEFAULT
BIG = [BIG_DICT, BIG_LIST, BIG_TUPLE, BIG_SET, BIG_FROZENSET, BIG_DEQUE, TEXT_ASCII,
       TEXT_LATIN1, TEXT_UCS2, TEXT_UCS4, TEXT_INTERNED, BIG_INT, BIG_BYTEARRAY, HOT_CODE,
       BIG_FRAME] + BIG_BYTES + [
    o for o in (BIG_GEN, BIG_CORO) if sys.getsizeof(o) > 100000]


def record():
    gc.collect()
    own = (Order, Slotted, Blob, Node)
    counted = own + (type(BIG_GEN), type(BIG_CORO))
    types = {name_of(c): [0, 0] for c in counted}
    for o in gc.get_objects():
        if type(o) in counted:
            t = types[name_of(type(o))]
            t[0] += 1
            t[1] += sys.getsizeof(o)
    objects = {str(id(o)): [name_of(type(o)), sys.getsizeof(o), sized(o)] for o in BIG}
    for o in (BIG_INT, HOT_CODE, BIG_FRAME, BIG_GEN, BIG_CORO):
        if str(id(o)) in objects:
            objects[str(id(o))][2] = None
    objects.update(ONLY_IN_FUNCTIONS)
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
