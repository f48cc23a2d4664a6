"""What the why_* scenarios (issue 37: idle threads, waits on the outside world) share: the
addresses of a socket as the report writes them, waiting until threads are blocked in a system
call, and the truth a child process (a pool's worker, a forked server worker) records about
itself. Not a scenario itself (no ``__main__``)."""

import json
import os
import sys
import threading
import time

import _truth

MAX_BLOCK_SECONDS = 20.0
POLL_SECONDS = 0.01


def address(sockaddr):
    """``sock.getsockname()`` / ``getpeername()`` as the report writes it: ``"ip:port"``,
    IPv6 as ``"[ip]:port"``, a unix socket's path, ``"@name"`` for an abstract one (Python
    gives it as bytes, its leading NUL included)."""
    if isinstance(sockaddr, str):
        return sockaddr
    if isinstance(sockaddr, bytes):
        return "@" + sockaddr[1:].decode()
    host, port = sockaddr[:2]
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


def sock_record(sock):
    """fd, local and peer of a connected socket (peer None for a listening one)."""
    try:
        peer = address(sock.getpeername())
    except OSError:
        peer = None
    return {"fd": sock.fileno(), "local": address(sock.getsockname()), "peer": peer,
            "id": id(sock), "type": _truth.type_name(type(sock))}


def syscall_of(pid, tid):
    """The first field of /proc/PID/task/TID/syscall: a system call's number, or ``running``;
    None when unreadable."""
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return None


def wait_blocked(pid, tids, what="threads"):
    """Wait until every thread ``tids`` of process ``pid`` sits in a system call (and stays in
    the same one over two looks ``POLL_SECONDS`` apart)."""
    deadline = time.monotonic() + MAX_BLOCK_SECONDS
    previous = None
    while True:
        now = [syscall_of(pid, tid) for tid in tids]
        if all(c not in (None, "running") for c in now) and now == previous:
            return now
        if time.monotonic() > deadline:
            _truth.fail("%s %r of pid %d not blocked within %.0f s: %r"
                        % (what, tids, pid, MAX_BLOCK_SECONDS, now))
        previous = now
        time.sleep(POLL_SECONDS)


def child_truth_path(prefix, pid):
    return "%s.child%d.json" % (prefix, pid)


def record_main_when_idle(prefix, extra=None):
    """Start a thread, ``recorder``, in this (child) process: once the main thread is blocked
    in a system call and its stack has settled, it writes ``PREFIX.child<PID>.json`` (the main
    thread's frames, then its own on its blocking line) and blocks in ``_truth.HELD``. Used as
    a pool's initializer: the main thread then goes to wait for work."""
    main = threading.main_thread()
    pid = os.getpid()

    def record():
        frames = None
        deadline = time.monotonic() + MAX_BLOCK_SECONDS
        while True:
            time.sleep(0.1)
            wait_blocked(pid, [pid], "main thread")
            now = _truth.frames_from(sys._current_frames()[main.ident])
            if now == frames:
                break
            if time.monotonic() > deadline:
                _truth.fail("child %d: main thread did not settle" % pid)
            frames = now
        me = threading.current_thread()
        truth = {"pid": pid, "executable": sys.executable, "python": sys.version.split()[0],
                 "free_threaded": _truth.FREE_THREADED, "threads": [
                     {"native_id": pid, "thread_id": main.ident, "name": main.name,
                      "frames": frames}]}
        truth.update(extra or {})
        path = child_truth_path(prefix, pid)
        truth["threads"].append(_truth._thread_entry(me, None))
        truth["threads"][-1]["frames"] = _truth.frames_from(sys._getframe(0))
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(truth, f)
        os.replace(path + ".tmp", path); _truth.HELD.acquire()  # noqa: E702

    threading.Thread(target=record, name="recorder", daemon=True).start()


def wait_for_child_truths(prefix, pids):
    """[{pid, truth}] of every child in ``pids``, once each has written its truth and its
    recorder is blocked too."""
    deadline = time.monotonic() + MAX_BLOCK_SECONDS
    out = []
    for pid in pids:
        path = child_truth_path(prefix, pid)
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                _truth.fail("child %d wrote no truth within %.0f s" % (pid, MAX_BLOCK_SECONDS))
            time.sleep(POLL_SECONDS)
        with open(path, encoding="utf-8") as f:
            truth = json.load(f)
        wait_blocked(pid, [t["native_id"] for t in truth["threads"]], "child threads")
        out.append({"pid": pid, "truth": truth})
    return out


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def children_of(pid):
    """Pids whose parent is ``pid`` (from /proc/*/stat)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return sorted(out)


def loop_in_thread(main):
    """Runs ``main(tasks)`` (a coroutine function that fills the dict ``tasks``, name -> Task)
    on a new event loop in daemon thread "loop"; returns ``holder`` {tasks, loop, native_id},
    whose loop and native_id are set once that thread runs."""
    import asyncio  # here: a scenario picks its Task (the pure-Python one) before the import

    holder = {"tasks": {}}

    def run():
        loop = asyncio.new_event_loop()
        holder.update(loop=loop, native_id=threading.get_native_id())
        loop.run_until_complete(main(holder["tasks"]))

    threading.Thread(target=run, name="loop", daemon=True).start()
    return holder


def tasks_at(tasks, line_of):
    """Whether each task's own coroutine (its last frame of ``get_stack()``) is at line
    ``line_of(name)``."""
    for name, task in tasks.items():
        stack = task.get_stack()
        if not stack or stack[-1].f_lineno != line_of(name):
            return False
    return True


def wait_parked(parked):
    """Wait until ``parked()`` says every task is where it should be."""
    deadline = time.monotonic() + _truth.MAX_SETTLE_SECONDS
    while not parked():
        if time.monotonic() > deadline:
            _truth.fail("the tasks never parked")
        time.sleep(POLL_SECONDS)
