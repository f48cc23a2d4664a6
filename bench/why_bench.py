#!/usr/bin/env python3
"""Benchmark what `--why` costs (issue 37): `pyunwind pid P --why --json` must take at most
twice as long as a plain `pyunwind pid P --json` of the same process.

Two targets, each run by Debian's /usr/bin/python3.11:

  verdicts  tests/scenarios/why_waits.py: a lock-order deadlock of two threads and one thread
            in each kind of wait --why names (lock, event, queue, condition, semaphore,
            SimpleQueue), the main thread in a join.
  pool64    a ThreadPoolExecutor of 64 workers (POOL below): 58 idle, waiting for work; two
            blocked on a lock the main thread holds, one in recv() on a local TCP connection
            that never answers, one reading a pipe, one in time.sleep, one waiting for a
            child (subprocess.run). The main thread waits in a join.

For each target the two commands are run alternately, RUNS times each after WARMUP runs of
both, so that a drift of the machine's load falls on both alike; the cost is the ratio of the
medians (the ratio of the fastest runs is printed beside it). Every run's output is checked:
the report's threads (every thread of the process, the same in both) and, with --why, each
thread's state (`state` and `idle`, counted) and the deadlocks (why_waits.py's one,
none in the pool), so a failing command is never timed as if it worked.

Exit status (bench/verdicts.py): 0 when both targets were measured and met, 1 when a command
failed, a target could not be measured or was missed (`bench: MISSED: ...`), 2 for a missing
build or interpreter. Stdlib only.
"""

import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from verdicts import Verdicts

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = pathlib.Path(os.environ.get("PYUNWIND_CLI") or ROOT / "target" / "release" / "pyunwind")
PYTHON = "/usr/bin/python3.11"
WHY_WAITS = ROOT / "tests" / "scenarios" / "why_waits.py"
RUNS = 31
WARMUP = 3
# Target: --why at most this many times a plain read's time.
MAX_RATIO = 2.0
READY_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 60.0
POOL_WORKERS = 64
# (`state`, `idle`) -> how many of the pool's threads --why gives it: its 58 idle workers wait
# for work; the main thread's join and the six blocked tasks are in system calls. (Each of
# why_waits.py's threads, as many as its truth lists, is blocked in a system call: futex,
# sem_wait.)
POOL_STATES = {("idle", "pool_worker"): POOL_WORKERS - 6, ("syscall", None): 7}

# The 64-thread pool. Every worker is started (a ThreadPoolExecutor starts a thread per
# submit() while none is idle, so 64 tasks that meet at a barrier start all 64), then the
# blocking tasks are submitted; `ready` is printed once every thread of the process is blocked
# in a system call (/proc/self/task/*/syscall) twice in a row, 0.1 s apart.
POOL = r"""
import concurrent.futures, os, socket, subprocess, sys, threading, time

WORKERS = 64
HELD = threading.Lock()
HELD.acquire()

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
client = socket.create_connection(listener.getsockname())
server_side, _ = listener.accept()  # accepted, never written to
read_end, write_end = os.pipe()


def blocked_on_lock():
    HELD.acquire()


def recv():
    client.recv(1)


def read_pipe():
    os.read(read_end, 1)


def sleep():
    time.sleep(3600)


def child():
    subprocess.run(["sleep", "3600"])


def all_blocked():
    me = str(threading.get_native_id())
    for tid in os.listdir("/proc/self/task"):
        if tid == me:
            continue
        try:
            with open("/proc/self/task/%s/syscall" % tid) as f:
                if f.read().split()[0] == "running":
                    return False
        except (OSError, IndexError):
            return False
    return True


pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS)
start = threading.Barrier(WORKERS + 1)
for _ in range(WORKERS):
    pool.submit(start.wait)
start.wait()
for task in (blocked_on_lock, blocked_on_lock, recv, read_pipe, sleep, child):
    pool.submit(task)
deadline = time.monotonic() + 30
settled = 0
while settled < 2:
    if time.monotonic() > deadline:
        sys.exit("pool: threads not blocked within 30 s")
    time.sleep(0.1)
    settled = settled + 1 if len(threading.enumerate()) == WORKERS + 1 and all_blocked() else 0
print("ready", flush=True)
pool._threads.copy().pop().join()
"""


def run_cli(args):
    """(seconds, completed process)."""
    start = time.perf_counter()
    proc = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, proc


def check(proc, threads, why, deadlocks, states):
    """Why the output is wrong, or None: exit 0, one report of ``threads`` threads and, when
    ``why``, their (state, idle) counted as ``states`` and ``deadlocks`` deadlocks found."""
    if proc.returncode != 0:
        return "exit %d: %s" % (proc.returncode, proc.stderr.strip()[-300:])
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return "not JSON: %r" % proc.stdout[:200]
    got = report.get("threads") or []
    if len(got) != threads:
        return "%d threads, expected %d" % (len(got), threads)
    if report.get("errors"):
        return "errors: %r" % report["errors"][:3]
    counted = dict(collections.Counter((t.get("state"), t.get("idle")) for t in got))
    if why and counted != states:
        return "states %r, expected %r" % (counted, states)
    if why and len(report.get("deadlocks") or []) != deadlocks:
        return "deadlocks %r, expected %d" % (report.get("deadlocks"), deadlocks)
    return None


def bench(verdicts, name, pid, threads, deadlocks, states):
    what = "%s: --why vs plain pid --json" % name
    plain, why = ["pid", pid, "--json"], ["pid", pid, "--why", "--json"]
    times = {"plain": [], "why": []}
    for i in range(WARMUP + RUNS):
        for key, args in (("plain", plain), ("why", why)):
            seconds, proc = run_cli(args)
            problem = check(proc, threads, key == "why", deadlocks, states)
            if problem:
                verdicts.failed("%s: pyunwind %s" % (name, " ".join(map(str, args))), problem)
                return
            if i >= WARMUP:
                times[key].append(seconds)
    plain_s, why_s = statistics.median(times["plain"]), statistics.median(times["why"])
    ratio = why_s / plain_s
    best = min(times["why"]) / min(times["plain"])
    verdict = verdicts.at_most(what, ratio, MAX_RATIO, "%.2fx")
    print("%-9s %3d threads: plain %6.1f ms, --why %6.1f ms (medians of %d): %.2fx "
          "(fastest runs %.2fx)  target <= %.1fx: %s"
          % (name, threads, plain_s * 1e3, why_s * 1e3, RUNS, ratio, best, MAX_RATIO, verdict))


def wait_ready(proc, what):
    """Reads the target's stdout until `ready`; the reason it did not come, or None."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    os.set_blocking(proc.stdout.fileno(), False)
    got = b""
    while b"ready\n" not in got:
        if proc.poll() is not None:
            return "%s exited (%d)" % (what, proc.returncode)
        if time.monotonic() > deadline:
            return "%s not ready within %.0f s" % (what, READY_TIMEOUT_S)
        got += proc.stdout.read() or b""
        time.sleep(0.02)
    return None


def verdict_program(verdicts, tmp):
    """why_waits.py, run the way the tests' harness runs it: TRUTH and a FIFO it writes
    `ready` into once its threads are in place."""
    truth, fifo = tmp / "truth.json", tmp / "ready.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)  # our own: the reader never sees end-of-file
    proc = subprocess.Popen([PYTHON, str(WHY_WAITS), str(truth), str(fifo)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
                            start_new_session=True)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        got = b""
        while b"ready\n" not in got:
            if proc.poll() is not None or time.monotonic() > deadline:
                verdicts.not_measured("verdicts", "why_waits.py did not get ready (exit %r)"
                                      % proc.poll())
                return
            try:
                got += os.read(reader, 64)
            except BlockingIOError:
                time.sleep(0.02)
        # The recording thread goes back to its join() after signalling.
        time.sleep(0.5)
        threads = len(json.loads(truth.read_text())["threads"])
        bench(verdicts, "verdicts", proc.pid, threads, 1, {("syscall", None): threads})
    finally:
        os.close(reader)
        os.close(writer)
        os.killpg(proc.pid, 9)
        proc.wait()


def pool_program(verdicts):
    proc = subprocess.Popen([PYTHON, "-c", POOL], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, start_new_session=True)
    try:
        problem = wait_ready(proc, "the pool program")
        if problem:
            verdicts.not_measured("pool64", problem)
            return
        bench(verdicts, "pool64", proc.pid, POOL_WORKERS + 1, 0, POOL_STATES)
    finally:
        os.killpg(proc.pid, 9)  # the pool and its `sleep` child
        proc.wait()


def main():
    for need, hint in ((CLI, "make build"), (PYTHON, "apt-get install python3.11")):
        if not os.access(need, os.X_OK):
            print("no %s (%s)" % (need, hint))
            return 2
    verdicts = Verdicts()
    try:
        with tempfile.TemporaryDirectory(prefix="pyunwind-bench-why-") as tmp:
            verdict_program(verdicts, pathlib.Path(tmp))
    except subprocess.TimeoutExpired as exc:
        verdicts.failed("verdicts", "timed out: %s" % exc)
    try:
        pool_program(verdicts)
    except subprocess.TimeoutExpired as exc:
        verdicts.failed("pool64", "timed out: %s" % exc)
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
