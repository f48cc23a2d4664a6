"""The WSGI application and gunicorn configuration that tests/scenarios/why_gunicorn.py runs
gunicorn with (``-c`` this file, app ``why_gunicorn_app:app``). Not a scenario itself.

Hooks: ``when_ready`` (in the arbiter) writes ``$PYUNWIND_GUNICORN_TRUTH.arbiter.json``: the
arbiter's pid and its listening address; ``post_worker_init`` (in each worker) writes
``$PYUNWIND_GUNICORN_TRUTH.worker<PID>.json``: the worker's pid and class.

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
# Requests wait for good: no worker may be killed for being silent while the tests run.
timeout = 3600
graceful_timeout = 1
loglevel = "warning"


def write(path, data):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


def when_ready(server):
    write(TRUTH + ".arbiter.json", {
        "pid": os.getpid(),
        "address": why_helpers.address(server.LISTENERS[0].sock.getsockname())})


def post_worker_init(worker):
    write(TRUTH + ".worker%d.json" % os.getpid(), {
        "pid": os.getpid(), "class": type(worker).__name__})


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
