"""An asyncio event loop blocked, busy or idle, for --why's `loops[]` (issue 49).

    python why_loops.py TRUTH_JSON READY_FIFO [IMPL] [MODE]

IMPL is ``c`` (default: the `_asyncio` Task), ``py`` (the pure-Python Task and Future) or
``uvloop`` (uvloop's loop; ``PYUNWIND_UVLOOP`` names the folder holding uvloop).

The loop runs in thread "loop". Its waiting tasks: "sleeper" in ``asyncio.sleep``, which
schedules the loop's earliest timer (``TIMER_SECONDS`` ahead), "eventer" on an Event, "getter"
on an empty Queue, and the main task ("Task-1"), which awaits the one that runs. MODE:

- ``blocked`` (default): task "slow" calls ``time.sleep`` inside ``async def``, the most common
  asyncio bug: the loop can run nothing else.
- ``busy``: task "hog" spins in Python on one line, never yielding.
- ``idle``: nothing runs; the loop waits in its selector (task "slow" awaits an Event too).

The main thread waits until the loop's thread runs the task's blocking line and the earliest
timer is ``LATE_SECONDS`` overdue, then records the truth and blocks on the same line
(``_truth.HELD``). The truth has ``loop`` {id, native_id, type}, ``running`` {id, name,
function, file, line} (blocked and busy), ``ready`` (``len(loop._ready)``; null on uvloop),
``earliest_when`` (``loop._scheduled[0]._when``; null on uvloop), ``tasks_waiting`` (the
loop's other pending tasks), ``mode`` and ``impl``.
"""

import os
import sys

IMPL = sys.argv[3] if len(sys.argv) > 3 else "c"
MODE = sys.argv[4] if len(sys.argv) > 4 else "blocked"
if IMPL == "py":
    sys.modules["_asyncio"] = None
elif IMPL == "uvloop":
    sys.path.insert(0, os.environ["PYUNWIND_UVLOOP"])

import asyncio  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

FOREVER = 100000
TIMER_SECONDS = 0.2
# How far past its deadline the earliest timer is when the truth is recorded: a busy loop's
# verdict line needs a second.
LATE_SECONDS = 1.2
STARTED = threading.Event()
RUNNING = {}
SPIN = [True]


def place(frame):
    return {"function": _truth.code_name(frame.f_code), "file": frame.f_code.co_filename,
            "line": frame.f_lineno}


def record(what):
    """Record the running task and the line of its ``# <what>`` marker."""
    marker = "# " + what
    task = asyncio.current_task()
    frame = sys._getframe(1)
    RUNNING.update(id=id(task), name=task.get_name(), **place(frame))
    RUNNING["line"] = _truth.source_line_of(marker, frame.f_code.co_filename)
    STARTED.set()


async def slow():
    record("slow blocks")
    time.sleep(FOREVER)  # slow blocks


async def hog():
    record("hog spins")
    while SPIN[0]: pass  # noqa: E701  # hog spins


async def parked(event):
    STARTED.set()
    await event.wait()  # slow parks


async def main():
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    queue = asyncio.Queue()
    loop.create_task(asyncio.sleep(TIMER_SECONDS), name="sleeper")
    loop.create_task(event.wait(), name="eventer")
    loop.create_task(queue.get(), name="getter")
    # Let them park before the one that runs starts.
    for _ in range(3):
        await asyncio.sleep(0)
    body = {"blocked": slow, "busy": hog, "idle": lambda: parked(event)}[MODE]
    await loop.create_task(body(), name="slow" if MODE != "busy" else "hog")


def run_loop(holder):
    if IMPL == "uvloop":
        import uvloop
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    holder["loop"] = loop
    holder["native_id"] = threading.get_native_id()
    loop.run_until_complete(main())


def wait_for_the_stop(holder):
    if not STARTED.wait(_truth.MAX_START_SECONDS):
        _truth.fail("the loop's task did not start")
    loop = holder["loop"]
    ident = holder["thread"].ident
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    if MODE == "idle":
        # Until the timer has fired and the loop is back in its selector.
        time.sleep(TIMER_SECONDS + LATE_SECONDS)
        return None
    while True:
        frame = sys._current_frames().get(ident)
        here = frame is not None and place(frame) == {
            k: RUNNING[k] for k in ("function", "file", "line")}
        when = None if IMPL == "uvloop" else loop._scheduled[0].when()
        if here and (when is None or time.monotonic() > when + LATE_SECONDS):
            return when
        if time.monotonic() > deadline:
            _truth.fail("the loop never reached its stop")
        time.sleep(0.01)


def main_thread():
    holder = {}
    t = threading.Thread(target=run_loop, args=(holder,), name="loop", daemon=True)
    holder["thread"] = t
    t.start()
    when = wait_for_the_stop(holder)
    loop = holder["loop"]
    pending = [x for x in asyncio.all_tasks(loop) if not x.done()]
    truth = {
        "impl": IMPL,
        "mode": MODE,
        "loop": {"id": id(loop), "native_id": holder["native_id"],
                 "type": _truth.type_name(type(loop))},
        "running": RUNNING if MODE != "idle" else None,
        "ready": None if IMPL == "uvloop" else len(loop._ready),
        "earliest_when": None if IMPL == "uvloop" or not loop._scheduled
        else loop._scheduled[0].when(),
        "tasks_waiting": len(pending) - (MODE != "idle"),
        # For the corruption campaign (tools/fuzz/campaign.py): the loop's queues and timers.
        "aim": {} if IMPL == "uvloop" else {
            "loop_queue": [id(loop._ready), id(loop._scheduled)],
            "timer": [id(h) for h in loop._scheduled[:8]],
        },
    }
    if MODE != "idle":
        assert truth["earliest_when"] in (None, when)
    _truth.ready(**truth); _truth.HELD.acquire()  # noqa: E702


main_thread()
