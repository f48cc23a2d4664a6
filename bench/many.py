#!/usr/bin/env python3
"""Benchmark the many-process paths of issue 28 against its targets:

  merge     `pyunwind merge` of 10,000 saved reports (each 4 threads x 50 frames, 20 distinct
            stacks), from one file: wall time (target < 5 s) and peak RSS; the peak is also
            measured for 1,000 reports, to show it does not grow with the reports.
  pid       `pyunwind pid P1..P64 --group` over 64 local processes (Debian's python3.11, each
            20 frames deep in a sleep): wall time (target < 1 s).

Each time is the median of 3 runs; each run's output is checked (every report merged into the
expected groups; 64 processes grouped into one group), so a failing run is never timed as if
it worked. Exit status 0 when both ran and gave the expected output (a missed target is a
result, printed), 1 otherwise. Stdlib only.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = pathlib.Path(os.environ.get("PYUNWIND_CLI") or ROOT / "target" / "release" / "pyunwind")
PYTHON = "/usr/bin/python3.11"
RUNS = 3
REPORTS = 10_000
THREADS, FRAMES, SHAPES = 4, 50, 20
PROCESSES = 64

SLEEPER = """\
import sys, time
def down(n):
    if n == 0:
        sys.stdout.write("ready\\n"); sys.stdout.flush(); time.sleep(3600)
    down(n - 1)
down(20)
"""


def report(i):
    threads = []
    for t in range(THREADS):
        shape = (i + t) % SHAPES
        frames = [{"kind": "python", "function": "f%d_%d" % (shape, k),
                   "file": "/srv/app/mod%d.py" % (k % 7), "line": 10 + k, "entry": k == 0,
                   "address": 140000000000000 + k * 80} for k in range(FRAMES)]
        threads.append({"native_id": 1000 + i * 8 + t, "thread_id": 1, "name": "worker-%d" % t,
                        "holds_gil": False, "interpreter": 1, "thread_state": 2,
                        "frames": frames, "truncated": False})
    return {"host": "node%03d" % (i % 100), "pid": 1000 + i,
            "python": {"version": "3.12.1", "free_threaded": False, "jit": False,
                       "found_by": "bench", "source": "live", "pid": 1000 + i},
            "threads": threads, "errors": []}


def timed(args):
    """(seconds, completed process)."""
    start = time.monotonic()
    proc = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    return time.monotonic() - start, proc


def peak_rss(args):
    """The CLI's own peak RSS, from a small parent whose only child it is."""
    probe = ("import os, sys\npid = os.fork()\nif pid == 0:\n"
             "    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1)\n"
             "    os.execv(sys.argv[1], sys.argv[1:])\n"
             "_, status, usage = os.wait4(pid, 0)\nprint(usage.ru_maxrss * 1024)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(CLI), *map(str, args)],
                         capture_output=True, text=True, timeout=300, check=True)
    return int(out.stdout.split()[-1])


def bench_merge(tmp):
    ok = True
    for n in (1_000, REPORTS):
        path = tmp / ("reports-%d.json" % n)
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps(report(i), separators=(",", ":")) + "\n")
        size = path.stat().st_size
        times = []
        for _ in range(RUNS):
            seconds, proc = timed(["merge", path, "--json"])
            got = json.loads(proc.stdout) if proc.returncode == 0 else None
            if (got is None or got["reports"] != n or got["threads"] != n * THREADS
                    or len(got["groups"]) != SHAPES or got["failed"]):
                print("merge %d: unexpected output (rc %d): %s"
                      % (n, proc.returncode, proc.stderr[-500:]))
                return False
            times.append(seconds)
        rss = peak_rss(["merge", path, "--json"])
        median = statistics.median(times)
        verdict = ("target < 5 s: met" if median < 5 else "target < 5 s: MISSED") \
            if n == REPORTS else ""
        print("merge  %6d reports (%4d MiB): %6.2f s, peak RSS %4d MiB  %s"
              % (n, size >> 20, median, rss >> 20, verdict))
    return ok


def bench_pid():
    if not os.access(PYTHON, os.X_OK):
        print("pid: %s missing" % PYTHON)
        return False
    procs = []
    try:
        for _ in range(PROCESSES):
            procs.append(subprocess.Popen([PYTHON, "-c", SLEEPER], stdout=subprocess.PIPE))
        for p in procs:
            if p.stdout.readline() != b"ready\n":
                print("pid: a sleeper did not start")
                return False
        pids = [p.pid for p in procs]
        times = []
        for _ in range(RUNS):
            seconds, proc = timed(["pid", *pids, "--group", "--json"])
            got = json.loads(proc.stdout) if proc.returncode == 0 else None
            if got is None or got["reports"] != PROCESSES or len(got["groups"]) != 1:
                print("pid: unexpected output (rc %d): %s" % (proc.returncode, proc.stderr[-500:]))
                return False
            times.append(seconds)
        median = statistics.median(times)
        print("pid    %6d processes:           %6.2f s  target < 1 s: %s"
              % (PROCESSES, median, "met" if median < 1 else "MISSED"))
        return True
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    if not os.access(CLI, os.X_OK):
        print("no CLI at %s (make build)" % CLI)
        return 1
    with tempfile.TemporaryDirectory(prefix="pyunwind-bench-many-") as tmp:
        ok = bench_merge(pathlib.Path(tmp))
    ok = bench_pid() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
