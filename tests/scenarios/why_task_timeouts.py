"""asyncio tasks inside `asyncio.timeout()` deadlines, for --why's `tasks[].timeout` (issue 49).

    python why_task_timeouts.py TRUTH_JSON READY_FIFO [IMPL]

IMPL is ``c`` (default: the `_asyncio` Task) or ``py`` (the pure-Python Task and Future).
The loop runs in thread "loop", idle in its selector once every task is parked; every task
awaits the Event ``EV``, which nothing sets:

- "timed": inside ``async with asyncio.timeout(1000) as cm``;
- "nested": inside ``asyncio.timeout(2000)`` and, within it, ``asyncio.timeout(1500)``: the
  inner one fires first;
- "deeper": ``timeout(1800)`` in ``deeper``, whose ``inner`` coroutine awaits: the deadline is
  in the outer frame;
- "waitfor": ``await asyncio.wait_for(EV.wait(), 1200)``: a Timeout of wait_for's own frame
  from 3.12 on; none on 3.11, whose wait_for schedules a plain callback;
- "untimed": inside ``asyncio.timeout(None)``: no deadline;
- "plain": no timeout at all.

The truth has, per task name: ``id``, ``line`` (its own coroutine's line, from its ``# <name>
waits`` marker), and ``timeout``: null, or {``id`` (the Timeout that fires first of those whose
``_task`` is this task, found among the loop's scheduled timers), ``when`` (its deadline, loop
time: time.monotonic()), ``function`` (the function whose ``async with`` holds it)}.
"""

import os
import sys
import time

IMPL = sys.argv[3] if len(sys.argv) > 3 else "c"
if IMPL == "py":
    sys.modules["_asyncio"] = None

import asyncio  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

NAMES = ["timed", "nested", "deeper", "waitfor", "untimed", "plain"]
# Which function's `async with` holds each task's first deadline.
HOLDER = {"timed": "timed", "nested": "nested", "deeper": "deeper", "waitfor": "wait_for"}
EV = None


async def timed():
    async with asyncio.timeout(1000):
        await EV.wait()  # timed waits


async def nested():
    async with asyncio.timeout(2000):
        async with asyncio.timeout(1500):
            await EV.wait()  # nested waits


async def inner():
    await EV.wait()


async def deeper():
    async with asyncio.timeout(1800):
        await inner()  # deeper waits


async def waitfor():
    await asyncio.wait_for(EV.wait(), 1200)  # waitfor waits


async def untimed():
    async with asyncio.timeout(None):
        await EV.wait()  # untimed waits


async def plain():
    await EV.wait()  # plain waits


async def main(tasks):
    global EV
    EV = asyncio.Event()
    loop = asyncio.get_running_loop()
    for name in NAMES:
        tasks[name] = loop.create_task(globals()[name](), name=name)
    await asyncio.Event().wait()


def marker_line(name):
    return _truth.source_line_of("# %s waits" % name, __file__)


def first_deadline(loop, task):
    """The Timeout of `task` that fires first, from the loop's timers (a Timeout schedules
    its `_on_timeout` when it has a deadline)."""
    mine = [h for h in loop._scheduled
            if isinstance(getattr(h._callback, "__self__", None), asyncio.Timeout)
            and h._callback.__self__._task is task]
    if not mine:
        return None
    h = min(mine, key=lambda h: h.when())
    return {"id": id(h._callback.__self__), "when": h._callback.__self__.when()}


def main_thread():
    holder = why_helpers.loop_in_thread(main)
    why_helpers.wait_parked(lambda: len(holder["tasks"]) == len(NAMES)
                            and why_helpers.tasks_at(holder["tasks"], marker_line))
    loop = holder["loop"]
    tasks = {}
    for name, t in holder["tasks"].items():
        timeout = first_deadline(loop, t)
        if timeout is not None:
            timeout["function"] = HOLDER[name]
        tasks[name] = {"id": id(t), "line": marker_line(name), "timeout": timeout}
    _truth.ready(impl=IMPL, tasks=tasks, loop={"id": id(loop), "native_id": holder["native_id"]})
    while True:
        time.sleep(1000)


main_thread()
