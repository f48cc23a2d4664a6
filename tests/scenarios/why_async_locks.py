"""asyncio tasks blocked in each of asyncio's primitives, and holding asyncio locks, for --why.

    python why_async_locks.py TRUTH_JSON READY_FIFO [IMPL]

IMPL is ``c`` (default: the `_asyncio` Task), ``py`` (the pure-Python Task and Future) or
``uvloop`` (the C Task on uvloop's loop; ``PYUNWIND_UVLOOP`` names the folder holding uvloop).

One loop; every task below is suspended when the truth is recorded:

- "holder" is inside ``async with L:`` and parks on Event ``PARK_H``; "waiter" is blocked
  entering ``async with L:`` and "acquirer" in ``await L.acquire()``: both wait for holder.
- "d1" holds ``A`` by ``async with A:`` and is entering ``async with B:``; "d2" holds ``B``
  and is entering ``async with A:``: a lock-order deadlock of two tasks.
- "condholder" is inside ``async with C:`` (a Condition) and parks on Event ``PARK_C``;
  "condenter" is blocked entering ``async with C:``. "condwaiter" is in ``await C2.wait()``
  inside ``async with C2:`` (which released C2's lock).
- "eventer" in ``await EV.wait()``, "getter" in ``await Q.get()`` on an empty Queue, "putter"
  in ``await QF.put()`` on a full one, "semaphorer" in ``await S.acquire()`` on Semaphore(0),
  "barrierer" in ``await BAR.wait()`` on a Barrier of 2 (3.11+).
- "taker" took ``L2`` with ``await L2.acquire()`` and parks on Event ``PARK_T``; "l2waiter"
  is blocked entering ``async with L2:``: the lock's holder left no trace.
- The main task ("Task-1") sleeps.

The loop runs in thread "loop". The main thread waits until the loop has been idle for
SETTLE_SECONDS, records the truth and blocks on the same line (``_truth.HELD``).

The truth has ``objects`` (``id()`` of every primitive), ``tasks`` (``{name: {"id", "frames"}}``,
each task's coroutine frames innermost first, from ``cr_await``), ``lines`` (the line of each
task's own frame at the stop, from the ``# <task> ...`` markers below), ``with_lines`` (the
line of the ``async with`` whose block holds a lock, from the ``# <task> takes ...`` markers),
``held`` (``id()`` of ``_truth.HELD``) and ``impl``.
"""

import os
import sys

IMPL = sys.argv[3] if len(sys.argv) > 3 else "c"
if IMPL == "py":
    sys.modules["_asyncio"] = None
elif IMPL == "uvloop":
    # The uvloop wheel for this interpreter, installed by tools/uvloop.sh.
    sys.path.insert(0, os.environ["PYUNWIND_UVLOOP"])

import asyncio  # noqa: E402
import threading  # noqa: E402
import types  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

FOREVER = 100000
SETTLE_SECONDS = 0.3

L = asyncio.Lock()
A = asyncio.Lock()
B = asyncio.Lock()
C = asyncio.Condition()
C2 = asyncio.Condition()
L2 = asyncio.Lock()
EV = asyncio.Event()
Q = asyncio.Queue()
QF = asyncio.Queue(maxsize=1)
S = asyncio.Semaphore(0)
BAR = asyncio.Barrier(2) if hasattr(asyncio, "Barrier") else None  # new in 3.11
PARK_H = asyncio.Event()
PARK_C = asyncio.Event()
PARK_T = asyncio.Event()
HOLDER_IN = asyncio.Event()
D1_IN = asyncio.Event()
D2_IN = asyncio.Event()
CH_IN = asyncio.Event()
TAKER_HAS = asyncio.Event()

SETTLED = threading.Event()
TASKS = {}  # name -> task, in creation order


async def holder():
    async with L:  # holder takes L
        HOLDER_IN.set()
        await PARK_H.wait()  # holder parks


async def waiter():
    await HOLDER_IN.wait()
    async with L:  # waiter enters L
        pass


async def acquirer():
    await HOLDER_IN.wait()
    await L.acquire()  # acquirer acquires L


async def d1():
    async with A:  # d1 takes A
        D1_IN.set()
        await D2_IN.wait()
        async with B:  # d1 enters B
            pass


async def d2():
    async with B:  # d2 takes B
        D2_IN.set()
        await D1_IN.wait()
        async with A:  # d2 enters A
            pass


async def condholder():
    async with C:  # condholder takes C
        CH_IN.set()
        await PARK_C.wait()  # condholder parks


async def condenter():
    await CH_IN.wait()
    async with C:  # condenter enters C
        pass


async def condwaiter():
    async with C2:
        await C2.wait()  # condwaiter waits on C2


async def eventer():
    await EV.wait()  # eventer waits on EV


async def getter():
    await Q.get()  # getter gets from Q


async def putter():
    QF.put_nowait(1)
    await QF.put(2)  # putter puts into QF


async def semaphorer():
    await S.acquire()  # semaphorer acquires S


async def barrierer():
    await BAR.wait()  # barrierer waits on BAR


async def taker():
    await L2.acquire()
    TAKER_HAS.set()
    await PARK_T.wait()  # taker parks


async def l2waiter():
    await TAKER_HAS.wait()
    async with L2:  # l2waiter enters L2
        pass


WORKERS = [holder, waiter, acquirer, d1, d2, condholder, condenter, condwaiter, eventer,
           getter, putter, semaphorer, barrierer, taker, l2waiter]

# Each worker's own frame at the stop is on the line of its marker: "# " then these words.
MARKERS = {"holder": "holder parks", "waiter": "waiter enters L",
           "acquirer": "acquirer acquires L", "d1": "d1 enters B", "d2": "d2 enters A",
           "condholder": "condholder parks", "condenter": "condenter enters C",
           "condwaiter": "condwaiter waits on C2", "eventer": "eventer waits on EV",
           "getter": "getter gets from Q", "putter": "putter puts into QF",
           "semaphorer": "semaphorer acquires S", "barrierer": "barrierer waits on BAR",
           "taker": "taker parks", "l2waiter": "l2waiter enters L2"}

# The `async with` whose block holds a lock is on the line of its marker: "# " then these words.
WITH_MARKERS = {"holder": "holder takes L", "d1": "d1 takes A", "d2": "d2 takes B",
                "condholder": "condholder takes C"}


def chain_of(coro):
    """A suspended coroutine's frames, innermost first, following ``cr_await`` (and
    ``gi_yieldfrom``: the pure-Python Future's ``__await__`` is a generator)."""
    frames, obj, seen = [], coro, set()
    while id(obj) not in seen:
        seen.add(id(obj))
        if isinstance(obj, types.CoroutineType):
            f, nxt = obj.cr_frame, obj.cr_await
        elif isinstance(obj, types.GeneratorType):
            f, nxt = obj.gi_frame, obj.gi_yieldfrom
        else:
            break
        if f is None:
            break
        frames.append({"function": _truth.code_name(f.f_code), "file": f.f_code.co_filename,
                       "line": f.f_lineno})
        obj = nxt
    frames.reverse()
    return frames


def objects():
    names = ["L", "A", "B", "C", "C2", "L2", "EV", "Q", "QF", "S", "BAR", "PARK_H", "PARK_C",
             "PARK_T"]
    out = {n: id(globals()[n]) for n in names if globals()[n] is not None}
    out["C_lock"] = id(C._lock)
    return out


def task_truth():
    return {name: {"id": id(t), "frames": chain_of(t.get_coro())} for name, t in TASKS.items()}


def marker_lines(markers):
    return {name: _truth.source_line_of("# " + marker, __file__)
            for name, marker in markers.items() if name in TASKS}


def record():
    """Waits for the loop to be idle, records everything, then blocks on the same line."""
    if not SETTLED.wait(_truth.MAX_SETTLE_SECONDS):
        _truth.fail("the loop did not settle")
    extra = dict(tasks=task_truth(), objects=objects(), lines=marker_lines(MARKERS),
                 with_lines=marker_lines(WITH_MARKERS), held=id(_truth.HELD), impl=IMPL)
    _truth.ready(**extra); _truth.HELD.acquire()  # noqa: E702


async def main():
    TASKS["Task-1"] = asyncio.current_task()
    for w in WORKERS:
        if w is barrierer and BAR is None:
            continue
        TASKS[w.__name__] = asyncio.create_task(w(), name=w.__name__)
    asyncio.get_running_loop().call_later(SETTLE_SECONDS, SETTLED.set)
    await asyncio.sleep(FOREVER)


def run_loop():
    if IMPL == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())
    _truth.fail("main returned")


if __name__ == "__main__":
    threading.Thread(target=run_loop, name="loop", daemon=True).start()
    record()
