"""Socket waits whose peer is a process of this host (issue 49 item 3: `peer_process`).

    python why_peers.py TRUTH_JSON READY_FIFO MODE [PORT]

MODE:

- ``asyncpg``: task "query" runs ``SELECT pg_sleep(600)`` through asyncpg on a connection to
  the PostgreSQL server the test started on 127.0.0.1:PORT; the scenario waits until the
  server's ``pg_stat_activity`` shows the query running in that connection's backend.
- ``aiohttp``: an aiohttp server on 127.0.0.1 whose handler never answers, and task "client"
  of an aiohttp ``ClientSession`` in the same process awaiting its response.
- ``threads``: thread "tcp_reader" in ``recv`` on a loopback TCP connection it accepted from a
  child process, thread "unix_reader" in ``recv`` on its end of a ``socketpair`` whose other
  end only the child holds, and thread "shared_reader" in ``recv`` on a ``socketpair`` end
  whose other end both this process and the child hold (no one process is named). The child
  exits when its connection closes.
- ``unaccepted``: a child process listens on a unix socket at a path and on an abstract one and
  never accepts; threads "path_reader" and "abstract_reader" are in ``recv`` on a connection
  to each, and tasks "path_client" and "abstract_client" (asyncio streams,
  ``open_unix_connection``) await a read on one more connection to each: four connections
  that wait in the listeners' queues, not accepted yet. The child exits when its stdin closes
  (this process is gone).

``PYUNWIND_AIO`` names the folder holding asyncpg and aiohttp (tools/aioservices.sh). The
asyncio modes run the loop in thread "loop"; the main thread records the truth and blocks in
``_truth.HELD``. The truth has ``mode``, ``pid`` and ``comm`` (this process's ``/proc``
comm), and per mode: ``task`` {id, name, line} and ``sock`` {fd, local, peer, id, type} (the
waiting task's socket); asyncpg: ``server_pid`` (``conn.get_server_pid()``, the backend),
``server_comm``; aiohttp: ``accepted`` (the server's end of the client's connection, its
local and peer as the server saw them); threads: ``child`` {pid, comm}, ``tcp``, ``unix`` and
``shared`` {native_id, fd, local, peer, id, type}, and ``shared_other``, the inode of the
shared end; unaccepted: ``server`` {pid, comm, path, abstract} (the listeners' addresses as
the report writes them), ``readers`` {path, abstract: {native_id, fd, local, peer, id, type}}
and ``clients`` {path, abstract: {task: {id, name, line}, sock}}.
"""

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time

MODE = sys.argv[3]
if MODE in ("asyncpg", "aiohttp"):
    sys.path.insert(0, os.environ["PYUNWIND_AIO"])

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

FOREVER = 100000
RECORD = {}
KEEP = []  # what must stay open while the scenario waits
# The child of ``threads``: connects to the parent's port, keeps the socketpair ends it was
# given, and exits once the parent's end of its connection closes (the parent is gone).
CHILD = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
kept = [socket.socket(fileno=int(fd)) for fd in sys.argv[2:]]
s.recv(1)
"""


def comm(pid):
    with open("/proc/%d/comm" % pid, encoding="utf-8", errors="replace") as f:
        return f.read().rstrip("\n")


def task_record(task, marker):
    return {"id": id(task), "name": task.get_name(),
            "line": _truth.source_line_of("# " + marker, __file__)}


# --- asyncpg -----------------------------------------------------------------------------------


async def query(conn):
    await conn.fetch("SELECT pg_sleep(600)")  # query waits


async def asyncpg_main(parked):
    import asyncpg

    port = int(sys.argv[4])
    connect = lambda: asyncpg.connect(host="127.0.0.1", port=port, user="postgres",  # noqa: E731
                                      database="postgres")
    conn = await connect()
    watch = await connect()
    backend = conn.get_server_pid()
    task = asyncio.get_running_loop().create_task(query(conn), name="query")
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while True:
        row = await watch.fetchrow("SELECT state, query FROM pg_stat_activity WHERE pid = $1",
                                   backend)
        if row is not None and row["state"] == "active" and "pg_sleep" in row["query"]:
            break
        if time.monotonic() > deadline:
            _truth.fail("the server never ran the query: %r" % (row,))
        await asyncio.sleep(0.01)
    await watch.close()
    RECORD.update(task=task_record(task, "query waits"),
                  sock=why_helpers.sock_record(conn._transport._sock),
                  server_pid=backend, server_comm=comm(backend))
    parked.set()
    await asyncio.Event().wait()


# --- aiohttp -----------------------------------------------------------------------------------


async def aiohttp_main(parked):
    from aiohttp import ClientSession, web

    started = asyncio.Event()
    accepted = {}

    async def hang(request):
        sock = request.transport._sock
        accepted.update(why_helpers.sock_record(sock))
        started.set()
        await asyncio.Event().wait()

    app = web.Application()
    app.router.add_get("/hang", hang)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    session = ClientSession()

    async def client():
        async with session.get("http://127.0.0.1:%d/hang" % port):  # client waits
            pass

    task = asyncio.get_running_loop().create_task(client(), name="client")
    await asyncio.wait_for(started.wait(), _truth.MAX_START_SECONDS)
    (proto,) = session.connector._acquired
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while task._fut_waiter is None or task.get_stack()[-1].f_lineno != task_record(
            task, "client waits")["line"]:
        if time.monotonic() > deadline:
            _truth.fail("the client never waited")
        await asyncio.sleep(0.01)
    RECORD.update(task=task_record(task, "client waits"),
                  sock=why_helpers.sock_record(proto.transport._sock), accepted=accepted)
    parked.set()
    await asyncio.Event().wait()


def run_loop(main, parked):
    loop = asyncio.new_event_loop()
    RECORD["loop_native_id"] = threading.get_native_id()
    loop.run_until_complete(main(parked))


# --- threads -------------------------------------------------------------------------------------


def reader(sock, key, started):
    RECORD[key] = dict(why_helpers.sock_record(sock), native_id=threading.get_native_id())
    started.set(); sock.recv(1)  # noqa: E702


def threads_main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    mine, theirs = socket.socketpair()
    # Its other end stays open here too: two processes hold it.
    shared, shared_other = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(listener.getsockname()[1]), str(theirs.fileno()),
         str(shared_other.fileno())],
        pass_fds=[theirs.fileno(), shared_other.fileno()])
    theirs.close()
    conn, _ = listener.accept()
    listener.close()
    _truth.start_threads({"tcp_reader": lambda started: reader(conn, "tcp", started),
                          "unix_reader": lambda started: reader(mine, "unix", started),
                          "shared_reader": lambda started: reader(shared, "shared", started)})
    why_helpers.wait_blocked(os.getpid(), [RECORD[k]["native_id"]
                                           for k in ("tcp", "unix", "shared")])
    # The child has its connection (accept returned) and holds its socketpair end.
    why_helpers.wait_blocked(child.pid, [child.pid], "the child")
    KEEP.append(shared_other)
    return {"child": {"pid": child.pid, "comm": comm(child.pid)}, "tcp": RECORD["tcp"],
            "unix": RECORD["unix"], "shared": RECORD["shared"],
            "shared_other": os.fstat(shared_other.fileno()).st_ino}


# --- unaccepted --------------------------------------------------------------------------------

# The server of ``unaccepted``: listens at the path and the abstract name it is given, and never
# accepts; exits when its stdin closes.
SERVER = """
import socket, sys
kept = []
for address in (sys.argv[1], b"\\0" + sys.argv[2].encode()):
    s = socket.socket(socket.AF_UNIX)
    s.bind(address)
    s.listen(8)
    kept.append(s)
print("listening", flush=True)
sys.stdin.read()
"""


def unix_connection(address):
    s = socket.socket(socket.AF_UNIX)
    s.connect(address)
    return s


async def unaccepted_client(address):
    reader, writer = await asyncio.open_unix_connection(address)
    KEEP.append(writer)
    RECORD.setdefault("socks", {})[asyncio.current_task().get_name()] = \
        why_helpers.sock_record(writer.transport._sock)
    await reader.read(1)  # unaccepted client waits


async def unaccepted_tasks(addresses, parked):
    loop = asyncio.get_running_loop()
    tasks = {key: loop.create_task(unaccepted_client(address), name=key + "_client")
             for key, address in addresses.items()}
    line = task_record(next(iter(tasks.values())), "unaccepted client waits")["line"]
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while any(t._fut_waiter is None or t.get_stack()[-1].f_lineno != line
              for t in tasks.values()):
        if time.monotonic() > deadline:
            _truth.fail("the clients never waited")
        await asyncio.sleep(0.01)
    RECORD["tasks"] = {key: {"task": task_record(t, "unaccepted client waits"),
                             "sock": RECORD["socks"][t.get_name()]} for key, t in tasks.items()}
    parked.set()
    await asyncio.Event().wait()


def unaccepted_main():
    path = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])),
                        "why_peers-%d.sock" % os.getpid())
    name = "pyunwind-why-peers-%d" % os.getpid()
    server = subprocess.Popen([sys.executable, "-c", SERVER, path, name], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    KEEP.append(server)
    if server.stdout.readline() != b"listening\n":
        _truth.fail("the server did not listen")
    addresses = {"path": path, "abstract": b"\0" + name.encode()}
    _truth.start_threads({
        key + "_reader": (lambda started, key=key: reader(unix_connection(addresses[key]), key,
                                                          started))
        for key in addresses})
    parked = threading.Event()
    threading.Thread(target=run_loop, args=(lambda p: unaccepted_tasks(addresses, p), parked),
                     name="loop", daemon=True).start()
    if not parked.wait(_truth.MAX_START_SECONDS + _truth.MAX_SETTLE_SECONDS):
        _truth.fail("the tasks never waited")
    why_helpers.wait_blocked(os.getpid(), [RECORD["loop_native_id"]] +
                             [RECORD[k]["native_id"] for k in addresses])
    return {"server": {"pid": server.pid, "comm": comm(server.pid), "path": path,
                       "abstract": why_helpers.address(addresses["abstract"])},
            "readers": {k: RECORD[k] for k in addresses}, "clients": RECORD["tasks"]}


def main():
    extra = {}
    if MODE == "threads":
        extra = threads_main()
    elif MODE == "unaccepted":
        extra = unaccepted_main()
    else:
        parked = threading.Event()
        main = asyncpg_main if MODE == "asyncpg" else aiohttp_main
        threading.Thread(target=run_loop, args=(main, parked), name="loop", daemon=True).start()
        if not parked.wait(_truth.MAX_START_SECONDS + _truth.MAX_SETTLE_SECONDS):
            _truth.fail("the task never waited")
        why_helpers.wait_blocked(os.getpid(), [RECORD["loop_native_id"]])
        extra = {k: v for k, v in RECORD.items() if k != "loop_native_id"}
    _truth.ready(mode=MODE, pid=os.getpid(), comm=comm(os.getpid()), **extra); _truth.HELD.acquire()  # noqa: E501,E702


main()
