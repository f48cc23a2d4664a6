#!/usr/bin/env python3
"""Benchmark the many-process paths of issue 28 against its targets:

  merge     `pyunwind merge` of 10,000 saved reports (each 4 threads x 50 frames, 20 distinct
            stacks), from one file: wall time (target < 5 s) and peak RSS; the peak is also
            measured for 1,000 reports, to show it does not grow with the reports.
  pid       `pyunwind pid P1..P64 --group` over 64 local processes (Debian's python3.11, each
            20 frames deep in a sleep): wall time (target < 1 s).
  children  `pyunwind pid --children LAUNCHER --group --why` over a launcher and its 64 ranks
            (the same sleepers, started by one Python process as torchrun starts its ranks):
            wall time (target < 1 s); the verdict must count the 64 ranks in its majority, no
            outlier, and leave the launcher out.

Each time is the median of 3 runs; each run's output is checked (every report merged into the
expected groups; 64 processes grouped into one group), so a failing run is never timed as if
it worked. Exit status (bench/verdicts.py) 0 when both ran, gave the expected output and met
their targets, 1 otherwise, each problem named on a `bench: FAILED|NOT MEASURED|MISSED: ...`
line at the end. Stdlib only.
"""

import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from verdicts import Verdicts

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

# A launcher of PROCESSES sleepers, which says ready once they all are, then sleeps itself, in
# a function of its own: its outermost frames are not the ranks' (as torchrun's are not).
LAUNCHER = """\
import subprocess, sys, time
def launch():
    kids = [subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE)
            for _ in range(int(sys.argv[2]))]
    for k in kids:
        if k.stdout.readline() != b"ready\\n":
            sys.exit(1)
    sys.stdout.write("ready\\n"); sys.stdout.flush(); time.sleep(3600)
launch()
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
    """The CLI's own peak RSS, from a small parent whose only child it is; None when the CLI
    did not exit 0."""
    probe = ("import os, sys\npid = os.fork()\nif pid == 0:\n"
             "    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1)\n"
             "    os.execv(sys.argv[1], sys.argv[1:])\n"
             "_, status, usage = os.wait4(pid, 0)\n"
             "print(usage.ru_maxrss * 1024 if os.waitstatus_to_exitcode(status) == 0 else -1)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(CLI), *map(str, args)],
                         capture_output=True, text=True, timeout=300)
    rss = int(out.stdout.split()[-1]) if out.returncode == 0 and out.stdout.split() else -1
    return rss if rss >= 0 else None


def parsed(proc):
    """The CLI's JSON output, or None when it failed or printed something else."""
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return None


def bench_merge(tmp, verdicts):
    for n in (1_000, REPORTS):
        path = tmp / ("reports-%d.json" % n)
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps(report(i), separators=(",", ":")) + "\n")
        size = path.stat().st_size
        times = []
        for _ in range(RUNS):
            seconds, proc = timed(["merge", path, "--json"])
            got = parsed(proc)
            if (got is None or got.get("reports") != n or got.get("threads") != n * THREADS
                    or len(got.get("groups") or ()) != SHAPES or got.get("failed")):
                verdicts.failed("merge of %d reports" % n,
                                "unexpected output (exit %d)" % proc.returncode,
                                detail=proc.stderr[-500:])
                return
            times.append(seconds)
        rss = peak_rss(["merge", path, "--json"])
        if rss is None:
            verdicts.failed("merge of %d reports" % n, "failed under the peak-RSS probe")
            return
        median = statistics.median(times)
        verdict = ""
        if n == REPORTS:
            verdict = "target < 5 s: " + verdicts.under(
                "merge of %d reports" % n, median, 5.0, "%.2f s")
        print("merge  %6d reports (%4d MiB): %6.2f s, peak RSS %4d MiB  %s"
              % (n, size >> 20, median, rss >> 20, verdict))


def bench_pid(verdicts):
    what = "pid --group of %d processes" % PROCESSES
    if not os.access(PYTHON, os.X_OK):
        verdicts.not_measured(what, "%s missing" % PYTHON)
        return
    procs = []
    try:
        for _ in range(PROCESSES):
            procs.append(subprocess.Popen([PYTHON, "-c", SLEEPER], stdout=subprocess.PIPE))
        for p in procs:
            if p.stdout.readline() != b"ready\n":
                verdicts.not_measured(what, "a sleeper did not start")
                return
        pids = [p.pid for p in procs]
        times = []
        for _ in range(RUNS):
            seconds, proc = timed(["pid", *pids, "--group", "--json"])
            got = parsed(proc)
            if (got is None or got.get("reports") != PROCESSES
                    or len(got.get("groups") or ()) != 1):
                verdicts.failed(what, "unexpected output (exit %d)" % proc.returncode,
                                detail=proc.stderr[-500:])
                return
            times.append(seconds)
        median = statistics.median(times)
        print("pid    %6d processes:           %6.2f s  target < 1 s: %s"
              % (PROCESSES, median, verdicts.under(what, median, 1.0, "%.2f s")))
    finally:
        for p in procs:
            p.kill()
            p.wait()


def verdict_problem(got):
    """Why `got` (`--children --group --why --json` of the launcher) is not the expected verdict;
    None when it is."""
    if got is None or got.get("reports") != PROCESSES + 1:
        return "not %d reports" % (PROCESSES + 1)
    v = got.get("verdict") or {}
    majority = v.get("majority") or {}
    if v.get("ranks") != PROCESSES or majority.get("count") != PROCESSES:
        return "the majority is not the %d ranks: %r" % (PROCESSES, majority.get("count"))
    if v.get("outliers") or len(v.get("left_out") or ()) != 1:
        return "outliers %r, left out %r" % (v.get("outliers"), v.get("left_out"))
    return None


def bench_children(verdicts):
    what = "pid --children --group --why of a launcher and %d ranks" % PROCESSES
    if not os.access(PYTHON, os.X_OK):
        verdicts.not_measured(what, "%s missing" % PYTHON)
        return
    launcher = subprocess.Popen([PYTHON, "-c", LAUNCHER, SLEEPER, str(PROCESSES)],
                                stdout=subprocess.PIPE, start_new_session=True)
    try:
        if launcher.stdout.readline() != b"ready\n":
            verdicts.not_measured(what, "the launcher or a rank did not start")
            return
        times = []
        for _ in range(RUNS):
            seconds, proc = timed(["pid", "--children", launcher.pid, "--group", "--why",
                                   "--json"])
            problem = verdict_problem(parsed(proc))
            if problem:
                verdicts.failed(what, "%s (exit %d)" % (problem, proc.returncode),
                                detail=proc.stderr[-500:])
                return
            times.append(seconds)
        median = statistics.median(times)
        print("children %4d processes + launcher: %5.2f s  target < 1 s: %s"
              % (PROCESSES, median, verdicts.under(what, median, 1.0, "%.2f s")))
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()


def main():
    if not os.access(CLI, os.X_OK):
        print("no CLI at %s (make build)" % CLI)
        return 2
    verdicts = Verdicts()
    try:
        with tempfile.TemporaryDirectory(prefix="pyunwind-bench-many-") as tmp:
            bench_merge(pathlib.Path(tmp), verdicts)
    except subprocess.TimeoutExpired as exc:
        verdicts.failed("merge", "timed out: %s" % exc)
    try:
        bench_pid(verdicts)
    except subprocess.TimeoutExpired as exc:
        verdicts.failed("pid --group", "timed out: %s" % exc)
    try:
        bench_children(verdicts)
    except subprocess.TimeoutExpired as exc:
        verdicts.failed("pid --children --group --why", "timed out: %s" % exc)
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
