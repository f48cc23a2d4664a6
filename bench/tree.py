#!/usr/bin/env python3
"""Benchmark the merged call tree of issue 38 against its target:

  tree      `pyunwind merge --tree --why` of 10,000 saved reports (each a rank: its main thread
            50 frames deep, 45 of them the same in every rank and the last 5 one of 20 shapes,
            one rank a straggler that left the others 6 frames up; and 3 worker threads of 20
            shapes, 50 frames each): wall time (target < 5 s) and peak RSS, also for 1,000
            reports, to show that memory does not grow with the reports' frames (target: peak
            RSS under 64 MiB for 10,000 reports, 222 MiB of JSON).

Each time is the median of 3 runs; each run's output is checked (every report merged, the
tree's counts, the verdict naming the straggler), so a failing run is never timed as if it
worked. Exit status (bench/verdicts.py) 0 when it ran, gave the expected output and met its
targets, 1 otherwise, each problem named on a `bench: FAILED|NOT MEASURED|MISSED: ...` line at
the end. Stdlib only.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from many import CLI, peak_rss, timed  # the same CLI, timed and measured the same way
from verdicts import Verdicts

RUNS = 3
REPORTS = 10_000
WORKERS, FRAMES, SHAPES, SHARED = 3, 50, 20, 45
MAX_RSS_BYTES = 64 << 20


def frame(function, file, line, k):
    return {"kind": "python", "function": function, "file": file, "line": line,
            "entry": k == 0, "address": 140000000000000 + k * 80}


def main_stack(i, straggler):
    """Innermost first: 5 frames of one of SHAPES shapes over SHARED shared ones; the
    straggler's last 6 frames are its own."""
    shared = [frame("step%d" % k, "/job/train.py", 100 + k, k) for k in range(SHARED)]
    if straggler:
        shared[SHARED - 1] = frame("step%d" % (SHARED - 1), "/job/train.py", 99, 0)
        inner = [frame("load_shard%d" % k, "/job/data.py", 10 + k, k) for k in range(5)]
    else:
        inner = [frame("wait%d_%d" % (i % SHAPES, k), "/job/dist.py", 10 + k, k)
                 for k in range(5)]
    return list(reversed(shared + list(reversed(inner))))


def report(i, straggler):
    threads = [{"native_id": 1000 + i * 8, "thread_id": 1, "name": "MainThread",
                "holds_gil": False, "interpreter": 1, "thread_state": 2,
                "frames": main_stack(i, i == straggler), "truncated": False,
                "state": "syscall", "syscall": "futex",
                "waiting": {"kind": "barrier", "object": 1, "type": "Barrier", "owner": None,
                            "frame": 0}}]
    for t in range(1, WORKERS + 1):
        shape = (i + t) % SHAPES
        frames = [frame("f%d_%d" % (shape, k), "/srv/app/mod%d.py" % (k % 7), 10 + k, k)
                  for k in range(FRAMES)]
        threads.append({"native_id": 1000 + i * 8 + t, "thread_id": 1,
                        "name": "worker-%d" % t, "holds_gil": False, "interpreter": 1,
                        "thread_state": 2, "frames": frames, "truncated": False,
                        "state": "idle", "syscall": "futex", "waiting": None})
    return {"host": "node%03d" % (i % 100), "pid": 1000 + i,
            "python": {"version": "3.12.1", "free_threaded": False, "jit": False,
                       "found_by": "bench", "source": "live", "pid": 1000 + i},
            "threads": threads, "errors": []}


def problem(got, n, straggler):
    """Why `got` (the CLI's JSON) is not the tree and verdict of n reports; None when it is."""
    if got is None:
        return "no JSON"
    if got.get("reports") != n or got.get("threads") != n * (WORKERS + 1) or got.get("failed"):
        return "reports %r, threads %r, failed %r" % (got.get("reports"), got.get("threads"),
                                                      got.get("failed"))
    tree = got.get("tree") or []
    # The main threads' root (all n), then the workers' SHAPES roots.
    counts = sorted((node["count"] for node in tree), reverse=True)
    want = [n] + sorted((sum(1 for i in range(n) for t in range(1, WORKERS + 1)
                             if (i + t) % SHAPES == s) for s in range(SHAPES)), reverse=True)
    if counts != want:
        return "top-level counts %r, expected %r" % (counts[:5], want[:5])
    v = got.get("verdict") or {}
    m = v.get("majority") or {}
    outliers = [o.get("pid") for o in v.get("outliers", [])]
    if (v.get("ranks"), m.get("count"), len(m.get("frames", [])), outliers) != \
            (n, n - 1, SHARED, [1000 + straggler]):
        return "verdict %r" % ({k: v.get(k) for k in ("ranks", "left_out")},)
    return None


def bench_tree(tmp, verdicts):
    for n in (1_000, REPORTS):
        straggler = n // 3
        what = "merge --tree --why of %d reports" % n
        path = tmp / ("reports-%d.json" % n)
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps(report(i, straggler), separators=(",", ":")) + "\n")
        size = path.stat().st_size
        args = ["merge", path, "--tree", "--why", "--json"]
        times = []
        for _ in range(RUNS):
            seconds, proc = timed(args)
            try:
                got = json.loads(proc.stdout) if proc.returncode == 0 else None
            except ValueError:
                got = None
            why = problem(got, n, straggler)
            if why:
                verdicts.failed(what, "unexpected output (exit %d): %s" % (proc.returncode, why),
                                detail=proc.stderr[-500:])
                return
            times.append(seconds)
        rss = peak_rss(args)
        if rss is None:
            verdicts.failed(what, "failed under the peak-RSS probe")
            return
        median = statistics.median(times)
        verdict = ""
        if n == REPORTS:
            verdict = "target < 5 s: %s, peak RSS < %d MiB: %s" % (
                verdicts.under(what, median, 5.0, "%.2f s"), MAX_RSS_BYTES >> 20,
                verdicts.under(what + " (peak RSS)", rss / (1 << 20), MAX_RSS_BYTES >> 20,
                               "%.0f MiB"))
        print("tree   %6d reports (%4d MiB): %6.2f s, peak RSS %4d MiB  %s"
              % (n, size >> 20, median, rss >> 20, verdict))


def main():
    if not os.access(CLI, os.X_OK):
        print("no CLI at %s (make build)" % CLI)
        return 2
    verdicts = Verdicts()
    try:
        with tempfile.TemporaryDirectory(prefix="pyunwind-bench-tree-") as tmp:
            bench_tree(pathlib.Path(tmp), verdicts)
    except subprocess.TimeoutExpired as exc:
        verdicts.failed("merge --tree", "timed out: %s" % exc)
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
