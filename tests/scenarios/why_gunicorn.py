"""gunicorn 27 (from PyPI, tools/gunicorn.sh) serving tests/scenarios/why_gunicorn_app.py with
2 workers of the class named by the first argument (``sync`` or ``gevent``; an optional second
argument N: N requests of each kind, named ``upstream-0``, ``sleep-0``, ...), as a child of this
program: ``python -m gunicorn``, with ``$PYUNWIND_GUNICORN`` (gunicorn and packaging) and, for
gevent, ``$PYUNWIND_GREENLET`` (tools/greenlet.sh's ``latest`` set) on its PYTHONPATH.

This program is the upstream (``UPSTREAM``: a listening socket nobody accepts on, so a
connection to it is made and never answered) and the client: it sends ``GET /upstream``, and
for gevent ``GET /sleep`` too, each on its own connection, and keeps them open. It waits until
every request has recorded itself (why_gunicorn_app.record) and every thread of the arbiter and
of the workers is blocked in a system call, then records its truth and blocks in
``_truth.HELD``.

The truth has ``worker_class``, ``arbiter`` {pid, address}, ``workers`` [{pid, class}],
``requests`` [the records of why_gunicorn_app.record], ``upstream`` (its address),
``busy`` (the pids of the workers with a request) and ``greenlets`` {pid: the process's
greenlets (why_gunicorn_app.census)}: the arbiter's, and under gevent each worker's, taken
once every request has parked (the scenario asks each worker for it).
"""

import glob
import json
import os
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _truth  # noqa: E402
import why_helpers  # noqa: E402

WORKERS = 2
MAX_START_SECONDS = 60.0
REQUESTS = {"sync": ["upstream"], "gevent": ["upstream", "sleep"]}


def wait_for(paths_fn, count, what):
    deadline = time.monotonic() + MAX_START_SECONDS
    while True:
        paths = sorted(paths_fn())
        if len(paths) >= count:
            out = []
            for p in paths:
                with open(p, encoding="utf-8") as f:
                    out.append(json.load(f))
            return out
        if time.monotonic() > deadline:
            _truth.fail("%s: %d of %d within %.0f s" % (what, len(paths), count,
                                                        MAX_START_SECONDS))
        time.sleep(0.05)


def tasks(pid):
    return sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))


def main():
    worker_class = sys.argv[3]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else None
    prefix = sys.argv[1]
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(16)
    up = why_helpers.address(upstream.getsockname())
    path = [os.environ["PYUNWIND_GUNICORN"], HERE]
    if worker_class == "gevent":
        path.insert(1, os.environ["PYUNWIND_GREENLET"])
    # gevent's pool threads (its resolver's) stay for the test's length (an hour, as the
    # requests do): one idle for 5 s would end by default (gevent's threadpool_idle_task_timeout,
    # which must be positive), and with it greenlets the census names.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYUNWIND_GUNICORN_TRUTH=prefix,
               PYUNWIND_UPSTREAM=up, GEVENT_THREADPOOL_IDLE_TASK_TIMEOUT="3600")
    arbiter_proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", os.path.join(HERE, "why_gunicorn_app.py"),
         "--workers", str(WORKERS), "--worker-class", worker_class, "--bind", "127.0.0.1:0",
         "why_gunicorn_app:app"], env=env, stdin=subprocess.DEVNULL)
    (arbiter,) = wait_for(lambda: glob.glob(prefix + ".arbiter.json"), 1, "arbiter")
    if arbiter["pid"] != arbiter_proc.pid:
        _truth.fail("the arbiter is %d, not the child %d" % (arbiter["pid"], arbiter_proc.pid))
    workers = wait_for(lambda: glob.glob(prefix + ".worker*.json"), WORKERS, "workers")
    host, port = arbiter["address"].rsplit(":", 1)
    clients = []
    paths = REQUESTS[worker_class] if count is None else [
        "%s/%d" % (kind, i) for i in range(count) for kind in REQUESTS[worker_class]]
    for name in paths:
        c = socket.create_connection((host, int(port)))
        c.sendall(b"GET /%s HTTP/1.1\r\nHost: test\r\n\r\n" % name.encode())
        clients.append(c)
    requests = wait_for(lambda: glob.glob(prefix + ".req-*.json"), len(clients), "requests")
    censuses = {str(arbiter["pid"]): arbiter.pop("greenlets")}
    if worker_class == "gevent":
        # Every request has parked: each worker takes its census of greenlets now.
        for w in workers:
            with open(prefix + ".census%d.go" % w["pid"], "w"):
                pass
        for c in wait_for(lambda: glob.glob(prefix + ".census*.json"), WORKERS, "censuses"):
            censuses[str(c["pid"])] = c["greenlets"]
    for pid in [arbiter["pid"]] + [w["pid"] for w in workers]:
        # Twice, a while apart: a thread a worker starts on its first request (gevent's
        # resolver pool) is seen by the second look.
        why_helpers.wait_blocked(pid, tasks(pid), "threads")
        time.sleep(0.3)
        why_helpers.wait_blocked(pid, tasks(pid), "threads")
    truth = dict(worker_class=worker_class, arbiter=arbiter, workers=workers,
                 requests=requests, upstream=up, busy=sorted({r["pid"] for r in requests}),
                 greenlets=censuses,
                 tasks={str(pid): tasks(pid) for pid in
                        [arbiter["pid"]] + [w["pid"] for w in workers]},
                 kept=[c.fileno() for c in clients])
    _truth.ready(**truth); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()
