"""asyncio tasks waiting beyond asyncio's primitives, for --why's `tasks[].waiting` (issue 49):
an executor job, `to_thread`, `asyncio.sleep`, a subprocess, a future nothing else refers to
and one kept in a list.

    python why_task_waits.py TRUTH_JSON READY_FIFO [IMPL]

IMPL is ``c`` (default: the `_asyncio` Task) or ``py`` (the pure-Python Task and Future).

The loop runs in thread "loop", idle in its selector once every task is parked:

- "executor": ``await loop.run_in_executor(None, blocking_recv)``; the job ``blocking_recv``
  waits in ``recv`` on a connection to ``SILENT``, a listening socket that never answers;
- "threaded": ``await asyncio.to_thread(blocking_lock)``; the job waits for ``HELD``;
- "sleeper": ``await asyncio.sleep(SLEEP_SECONDS)``;
- "child": ``await proc.wait()`` of ``asyncio.create_subprocess_exec("sleep", "1000")``;
- "orphan": ``await fut`` of a future made in its own frame, which nothing else can complete;
- "kept": the same, but the future is also kept in the list ``KEPT``;
- "streamer": ``await reader.read(1)`` on an asyncio stream connected to ``SILENT``;
- "sockrecv": ``await loop.sock_recv(sock, 1)`` on a socket connected to ``SILENT``;
- "fanout-0" to "fanout-2": ``await FAN.wait()`` on one Event, on one line: a group of three;
- "pair-0" and "pair-1": ``await reader.read(1)`` on streams connected to ``SILENT``, on one
  line: a group of two;
- "serving": ``await server.serve_forever()`` of ``asyncio.start_server``: an idle task.

The truth has, per task name: ``id``, ``fut`` (its ``_fut_waiter``: the future it awaits),
``line`` (its own frame's line, from its ``# <name> waits`` marker); and ``executor``
{native_id, name, fd, local, peer}, ``streamer`` and ``sockrecv`` {id, fd, local, peer} (the
socket object), ``threaded`` {native_id, name}, ``held`` (``id()`` of
``_truth.HELD``), ``sleep_when`` (the sleep's
``TimerHandle._when``), ``child`` {pid, argv}, ``loop`` {id, native_id}, ``silent`` (SILENT's
address), ``fan`` (``id(FAN)``), ``main_line`` (Task-1's line), ``aim`` (the streams'
transports, the loop's queues and timers, for the corruption campaign).
"""

import os
import socket
import sys
import threading

IMPL = sys.argv[3] if len(sys.argv) > 3 else "c"
if IMPL == "py":
    sys.modules["_asyncio"] = None

import asyncio  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

SLEEP_SECONDS = 1000
SILENT = socket.socket()
SILENT.bind(("127.0.0.1", 0))
SILENT.listen()
KEPT = []
JOBS = {}
NAMES = ["executor", "threaded", "sleeper", "child", "orphan", "kept", "streamer", "sockrecv"]
# Tasks that wait alike: function -> how many.
GROUPS = {"fanout": 3, "pair": 2}
FAN = asyncio.Event()
# The streams' transports, for the corruption campaign (tools/fuzz/campaign.py).
TRANSPORTS = []


def blocking_recv():
    sock = socket.create_connection(SILENT.getsockname())
    JOBS["executor"] = dict(why_helpers.sock_record(sock), native_id=threading.get_native_id(),
                            name=threading.current_thread().name)
    sock.recv(1)


def blocking_lock():
    JOBS["threaded"] = {"native_id": threading.get_native_id(),
                        "name": threading.current_thread().name}
    _truth.HELD.acquire()


async def executor():
    await asyncio.get_running_loop().run_in_executor(None, blocking_recv)  # executor waits


async def threaded():
    await asyncio.to_thread(blocking_lock)  # threaded waits


async def sleeper():
    await asyncio.sleep(SLEEP_SECONDS)  # sleeper waits


async def child():
    proc = await asyncio.create_subprocess_exec("sleep", "1000")
    JOBS["child"] = {"pid": proc.pid, "argv": ["sleep", "1000"]}
    await proc.wait()  # child waits


async def orphan():
    fut = asyncio.get_running_loop().create_future()
    await fut  # orphan waits


async def kept():
    fut = asyncio.get_running_loop().create_future()
    KEPT.append(fut)
    await fut  # kept waits


async def streamer():
    reader, writer = await asyncio.open_connection(*SILENT.getsockname())
    TRANSPORTS.append(writer.transport)
    JOBS["streamer"] = why_helpers.sock_record(writer.transport._sock)
    await reader.read(1)  # streamer waits


async def sockrecv():
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    await loop.sock_connect(sock, SILENT.getsockname())
    JOBS["sockrecv"] = why_helpers.sock_record(sock)
    await loop.sock_recv(sock, 1)  # sockrecv waits


async def fanout():
    await FAN.wait()  # fanout waits


async def pair():
    reader, writer = await asyncio.open_connection(*SILENT.getsockname())
    TRANSPORTS.append(writer.transport)
    await reader.read(1)  # pair waits


async def serving():
    server = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    await server.serve_forever()  # serving waits


async def main(tasks):
    loop = asyncio.get_running_loop()
    for name in NAMES:
        tasks[name] = loop.create_task(globals()[name](), name=name)
    for function, n in GROUPS.items():
        for i in range(n):
            name = "%s-%d" % (function, i)
            tasks[name] = loop.create_task(globals()[function](), name=name)
    tasks["serving"] = loop.create_task(serving(), name="serving")
    await asyncio.Event().wait()  # main waits


def parked(holder):
    """Whether every task waits where its marker says, and the jobs and the child started."""
    tasks = holder["tasks"]
    if len(tasks) < len(NAMES) + sum(GROUPS.values()) + 1 or len(JOBS) < 5:
        return False
    return why_helpers.tasks_at(tasks, marker_line)


def marker_line(name):
    """The line of the `# <function> waits` marker of task `name` ("fanout-1": fanout's)."""
    return _truth.source_line_of("# %s waits" % name.split("-")[0], __file__)


def main_thread():
    holder = why_helpers.loop_in_thread(main)
    why_helpers.wait_parked(lambda: parked(holder))
    why_helpers.wait_blocked(os.getpid(), [holder["native_id"], JOBS["executor"]["native_id"],
                                           JOBS["threaded"]["native_id"]])
    loop = holder["loop"]
    sleep_fut = holder["tasks"]["sleeper"]._fut_waiter
    (handle,) = [h for h in loop._scheduled if h._args and h._args[0] is sleep_fut]
    tasks = {name: {"id": id(t), "fut": id(t._fut_waiter),
                    "line": marker_line(name)}
             for name, t in holder["tasks"].items()}
    _truth.ready(impl=IMPL, tasks=tasks, sleep_when=handle.when(), held=id(_truth.HELD),
                 main_line=_truth.source_line_of("# " + "main waits", __file__), fan=id(FAN),
                 silent=why_helpers.address(SILENT.getsockname()),
                 aim={"transport": [id(t) for t in TRANSPORTS],
                      "loop_queue": [id(loop._ready), id(loop._scheduled)],
                      "timer": [id(h) for h in loop._scheduled[:8]]},
                 loop={"id": id(loop), "native_id": holder["native_id"]}, **JOBS); _truth.HELD.acquire()  # noqa: E501,E702


main_thread()
