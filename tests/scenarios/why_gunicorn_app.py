"""The WSGI application and gunicorn configuration that tests/scenarios/why_gunicorn.py runs
gunicorn with (``-c`` this file, app ``why_gunicorn_app:app``). Not a scenario itself.

Hooks: ``when_ready`` (in the arbiter) writes ``$PYUNWIND_GUNICORN_TRUTH.arbiter.json``: the
arbiter's pid, its listening address and its greenlets (``census``: the arbiter never runs
one, nor makes one after this); ``post_worker_init`` (in each worker) writes
``$PYUNWIND_GUNICORN_TRUTH.worker<PID>.json``: the worker's pid and class. A gevent worker
also spawns a greenlet that, once ``$PYUNWIND_GUNICORN_TRUTH.census<PID>.go`` exists (the
scenario makes it when every request has parked), writes the worker's ``census`` in
``$PYUNWIND_GUNICORN_TRUTH.census<PID>.json`` and ends.

Requests (``PATH_INFO``): ``/upstream`` opens a connection to ``$PYUNWIND_UPSTREAM`` (a local
server that never answers) with ``socket.create_connection`` and waits in ``recv``;
``/sleep`` waits in ``gevent.sleep``; ``/upstream/N`` and ``/sleep/N`` do the same as requests
named ``upstream-N`` and ``sleep-N``. Each records, on the line of its wait, the truth of the
request in ``$PYUNWIND_GUNICORN_TRUTH.req-<PID>-<NAME>.json``: the worker's pid and the
thread's native id, the frames (the request's own: under gevent, the greenlet's), the
socket's fd, local and peer addresses, and under gevent the greenlet's address and gevent's
own frames above the request's (``above``, innermost first), read once it has parked.
"""

import json
import os
import socket
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

TRUTH = os.environ["PYUNWIND_GUNICORN_TRUTH"]
# How often a gevent worker's census greenlet looks for the scenario's word to take it.
CENSUS_POLL_SECONDS = 0.05
# Requests wait for good: no worker may be killed for being silent while the tests run.
timeout = 3600
graceful_timeout = 1
loglevel = "warning"


def write(path, data):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


def census(me, hub):
    """Every greenlet of this process as the program sees it, found as gevent's own tools find
    them (nothing else lists a parked greenlet): the objects of a greenlet class on the
    collector's lists (``gc.get_objects()``). Each: its address, class name, whether it is a main
    greenlet (no parent), ``dead``, ``active`` (``bool``: started and not finished), whether it
    is ``me`` (the greenlet taking the census) or ``hub`` (this thread's gevent hub), and
    ``frames``: those of its ``gr_frame`` (where a suspended greenlet resumes), innermost first;
    None where it has none (one that runs, in this thread or another, one not started or
    dead). Empty where greenlet was never imported. Makes no greenlet (no ``getcurrent``)."""
    greenlet = sys.modules.get("greenlet")
    if greenlet is None:
        return []
    import gc
    out = []
    for g in [o for o in gc.get_objects() if isinstance(o, greenlet.greenlet)]:
        out.append({"address": id(g), "class": type(g).__name__,
                    "main": g.parent is None, "dead": g.dead, "active": bool(g),
                    "me": g is me, "hub": g is hub,
                    "frames": None if g.gr_frame is None else _truth.frames_from(g.gr_frame)})
    return out


def when_ready(server):
    write(TRUTH + ".arbiter.json", {
        "pid": os.getpid(),
        "address": why_helpers.address(server.LISTENERS[0].sock.getsockname()),
        "greenlets": census(None, None)})


def census_when_asked():
    """A gevent worker's census, taken in a greenlet of its own once the scenario asks (every
    request has parked), which ends right after. What runs later (the hub, the worker's loop
    for a moment each second) leaves each greenlet where the census found it."""
    import gevent
    pid = os.getpid()
    while not os.path.exists(TRUTH + ".census%d.go" % pid):
        gevent.sleep(CENSUS_POLL_SECONDS)
    write(TRUTH + ".census%d.json" % pid, {
        "pid": pid, "greenlets": census(gevent.getcurrent(), gevent.get_hub())})


def post_worker_init(worker):
    write(TRUTH + ".worker%d.json" % os.getpid(), {
        "pid": os.getpid(), "class": type(worker).__name__})
    if "gevent" in sys.modules:
        import gevent
        gevent.spawn(census_when_asked)


def record(name, caller, sock=None):
    """The request's truth, from ``caller`` (the frame on its waiting line)."""
    data = {"pid": os.getpid(), "native_id": threading.get_native_id(), "name": name,
            "thread_name": threading.current_thread().name,
            "frames": _truth.frames_from(caller)}
    if sock is not None:
        data["socket"] = why_helpers.sock_record(sock)
    path = TRUTH + ".req-%d-%s.json" % (os.getpid(), name)
    if "gevent" in sys.modules:
        import gevent
        me = gevent.getcurrent()
        data["greenlet"] = id(me)
        if sock is not None:
            # The socket's own method frames (gevent's socket is written in Python) sit on top
            # of the caller's: the wait's frame is the outermost of them, the one the app calls.
            data["gevent_socket"] = True

        def parked():
            # gevent's frames above the app's (`gevent.sleep`, the socket's `recv`) exist once
            # the request has switched to the hub: a greenlet spawned now runs after that and
            # reads them from the parked greenlet's own frame (`gr_frame`).
            full = _truth.frames_from(me.gr_frame)
            above = len(full) - len(data["frames"])
            assert above >= 1 and full[above:] == data["frames"], (full, data["frames"])
            data["above"] = full[:above]
            write(path, data)

        gevent.spawn(parked)
        return
    write(path, data)


def upstream(name):
    host, port = os.environ["PYUNWIND_UPSTREAM"].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    record(name, sys._getframe(0), sock); sock.recv(1)  # noqa: E702
    return sock


def sleep(name):
    import gevent
    record(name, sys._getframe(0)); gevent.sleep(1e6)  # noqa: E702


def app(environ, start_response):
    kind, _, n = environ["PATH_INFO"].lstrip("/").partition("/")
    name = "%s-%s" % (kind, n) if n else kind
    if kind == "upstream":
        upstream(name)
    elif kind == "sleep":
        sleep(name)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"done\n"]
