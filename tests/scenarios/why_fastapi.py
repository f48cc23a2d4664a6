"""FastAPI under uvicorn with the most common asyncio bug: an ``async def`` handler that calls
``time.sleep``, which blocks the event loop and every other request (issue 49).

    python why_fastapi.py TRUTH_JSON READY_FIFO [LOOP]

LOOP is ``asyncio`` (default) or ``uvloop`` (uvicorn's ``--loop uvloop``; ``PYUNWIND_UVLOOP``
names the folder holding uvloop). ``PYUNWIND_ASGI`` names the folder holding FastAPI and
uvicorn (tools/asgi.sh).

uvicorn serves the app in the main thread, as ``uvicorn.run`` does, on a socket bound here.
Thread "client" sends ``GET /upstream``, whose handler connects to ``SILENT`` (an upstream that
never answers) through anyio, as httpx does, and waits in ``SocketStream.receive``; then
``GET /slow``, whose handler ``slow`` blocks in ``time.sleep`` on the
line of its marker comment, then ``GET /fast``, which the blocked loop never serves.
Thread "recorder" waits until the loop's thread is there and uvicorn's own tick
(``Server.main_loop``'s ``asyncio.sleep(0.1)``) is ``LATE_SECONDS`` overdue, then records the
truth and blocks (``_truth.HELD``). The truth has ``loop`` {id, native_id, type}, ``running``
{id, name, function, file, line} (the request's task), ``ready`` and ``earliest_when`` (asyncio's
loop only), ``tasks_waiting`` (the loop's other pending tasks), ``upstream`` {task, id, fd,
local, peer, transport, transport_type} (the upstream request's task, its socket and the
stream's transport) and ``impl``.
"""

import os
import socket
import sys
import threading
import time

IMPL = sys.argv[3] if len(sys.argv) > 3 else "asyncio"
sys.path.insert(0, os.environ["PYUNWIND_ASGI"])
if IMPL == "uvloop":
    sys.path.insert(0, os.environ["PYUNWIND_UVLOOP"])

import asyncio  # noqa: E402

import anyio  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

FOREVER = 100000
LATE_SECONDS = 1.2
RUNNING = {}
STARTED = threading.Event()
UPSTREAM = {}
UPSTREAM_PARKED = threading.Event()
# The upstream that never answers: it accepts (the kernel's backlog) and sends nothing.
SILENT = socket.socket()
SILENT.bind(("127.0.0.1", 0))
SILENT.listen()
app = FastAPI()


@app.get("/slow")
async def slow():
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    RUNNING.update(id=id(task), name=task.get_name(), function="slow", file=__file__,
                   line=_truth.source_line_of("# " + "slow blocks", __file__), loop=loop,
                   tasks=[t for t in asyncio.all_tasks(loop) if t is not task])
    STARTED.set()
    time.sleep(FOREVER)  # slow blocks


@app.get("/upstream")
async def upstream():
    # httpx and httpcore reach an upstream through anyio's SocketStream, as here.
    stream = await anyio.connect_tcp(*SILENT.getsockname())
    sock = getattr(stream._transport, "_sock", None)  # uvloop's transports are C objects
    UPSTREAM.update(why_helpers.sock_record(sock) if sock is not None else {},
                    task=id(asyncio.current_task()), name=asyncio.current_task().get_name(),
                    transport=id(stream._transport),
                    transport_type=_truth.type_name(type(stream._transport)),
                    line=_truth.source_line_of("# " + "upstream waits", __file__))
    UPSTREAM_PARKED.set()
    await stream.receive()  # upstream waits


@app.get("/fast")
async def fast():
    return {"fast": True}


def client(port):
    with socket.create_connection(("127.0.0.1", port)) as slow_conn, \
            socket.create_connection(("127.0.0.1", port)) as fast_conn:
        up_conn = socket.create_connection(("127.0.0.1", port))
        up_conn.sendall(b"GET /upstream HTTP/1.1\r\nHost: x\r\n\r\n")
        if not UPSTREAM_PARKED.wait(_truth.MAX_START_SECONDS):
            _truth.fail("the upstream request did not start")
        slow_conn.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        if not STARTED.wait(_truth.MAX_START_SECONDS):
            _truth.fail("the handler did not start")
        fast_conn.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        fast_conn.recv(1)


def recorder(main_ident):
    if not STARTED.wait(_truth.MAX_START_SECONDS):
        _truth.fail("the handler did not start")
    loop = RUNNING["loop"]
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while True:
        frame = sys._current_frames().get(main_ident)
        here = frame is not None and frame.f_lineno == RUNNING["line"]
        # Empty when the tick's timer fell due as the loop took up slow: no timer left.
        when = None if IMPL == "uvloop" or not loop._scheduled else loop._scheduled[0].when()
        if here and (when is None or time.monotonic() > when + LATE_SECONDS):
            break
        if time.monotonic() > deadline:
            _truth.fail("the loop never blocked in slow")
        time.sleep(0.01)
    running = {k: RUNNING[k] for k in ("id", "name", "function", "file", "line")}
    _truth.ready(
        impl=IMPL, mode="blocked", running=running,
        loop={"id": id(loop), "native_id": threading.main_thread().native_id,
              "type": _truth.type_name(type(loop))},
        ready=None if IMPL == "uvloop" else len(loop._ready),
        earliest_when=when,
        tasks_waiting=len([t for t in RUNNING["tasks"] if not t.done()]),
        upstream=UPSTREAM,
    ); _truth.HELD.acquire()  # noqa: E702


def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    threading.Thread(target=client, args=(port,), name="client", daemon=True).start()
    threading.Thread(target=recorder, args=(threading.get_ident(),), name="recorder",
                     daemon=True).start()
    config = uvicorn.Config(app, loop=IMPL, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


main()
