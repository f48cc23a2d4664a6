#!/usr/bin/env python3
"""Benchmark `--heap` (issues 41 and 51) against its targets:

  1M    `pyunwind core CORE --heap --json` of a gcore core of a process holding 1,000,000
        objects (500,000 instances of a class with two attributes in a list, each with a str;
        the interpreter's own objects on top), the census and its retainers: wall time
        (target < 2 s), and `pid --heap` of the same process, with the objects counted and
        the first retainer (the list, `__main__.ITEMS`) checked.
  diff  `pyunwind diff OLD NEW --json` of the 1M process's live report and its core's
        (target < 1 s), its types checked.
  10M   the same with 10,000,000 objects (`--big`, not in `make bench`: a 1.5 GB process and
        a 1 GB core): wall time (target < 20 s) and peak RSS. The census reads on its own
        allowance (4 GiB, apart from the stop's 512 MiB), so the walk is complete; a run that
        meets a budget must say so (`complete: false`, an error naming the limit).

Each time is the median of 3 runs; a run whose output does not count the objects is never
timed as if it worked. Exit status 0 when every target was met (bench/verdicts.py).
Stdlib only; the interpreter is this one (python3) unless --python says.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from many import CLI, peak_rss, timed
from verdicts import Verdicts

RUNS = 3
PROGRAM = r"""
import sys
class Item:
    def __init__(self, i):
        self.i = i
        self.name = "item-%d" % i
N = int(sys.argv[1])
ITEMS = [Item(i) for i in range(N // 2)]
print("ready", flush=True)
sys.stdin.read()
"""


def heap_of(proc):
    """The report's `heap`, with `limit`: the error that stopped the walk at a budget (None
    when it was complete)."""
    if proc.returncode != 0:
        return None
    try:
        r = json.loads(proc.stdout)
        h = r["heap"]
    except (ValueError, KeyError):
        return None
    h["limit"] = next((e["what"] for e in r["errors"] if "limit" in e["what"]), None)
    return h


def bench(python, n, limit, verdicts, tmp):
    child = subprocess.Popen([python, "-c", PROGRAM, str(n)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            verdicts.failed("%d objects" % n, "the target did not start")
            return
        times, live = [], None
        for _ in range(RUNS):
            t, proc = timed(["pid", child.pid, "--heap", "--json"])
            live = heap_of(proc)
            times.append(t)
        live_json = proc.stdout
        prefix = os.path.join(tmp, "core")
        subprocess.run(["gcore", "-o", prefix, str(child.pid)], capture_output=True,
                       timeout=600, check=False)
        core = "%s.%d" % (prefix, child.pid)
    finally:
        child.kill()
        child.wait()
    if not os.path.exists(core):
        verdicts.not_measured("%d objects: core" % n, "gcore made no core")
        return
    core_times, heap = [], None
    for _ in range(RUNS):
        t, proc = timed(["core", core, "--heap", "--json"])
        heap = heap_of(proc)
        core_times.append(t)
    rss = peak_rss(["core", core, "--heap", "--json"])
    os.unlink(core)
    bench_diff(n, live_json, proc.stdout, verdicts, tmp)
    for what, h in (("live", live), ("core", heap)):
        items = h and {t["type"]: t["count"] for t in h["types"]}.get("__main__.Item")
        # Complete, or stopped at a budget and saying so.
        ok = h and (h["complete"] and items == n // 2
                    or not h["complete"] and h["limit"] and (items or 0) < n // 2)
        if not ok:
            verdicts.failed("%d objects (%s)" % (n, what), "Item instances counted: %r" % items)
            return
        first = h["retainers"][0] if h["complete"] and h["retainers"] else None
        if h["complete"] and not (first and first["len"] == n // 2 and first["held_by"] == [
                {"module": "__main__"}, {"attr": "ITEMS"}]):
            verdicts.failed("%d objects (%s)" % (n, what), "first retainer: %r" % first)
            return
    total = heap["objects"]
    core_s, live_s = statistics.median(core_times), statistics.median(times)
    print("heap %s objects%s: core %.2f s, pid %.2f s, peak RSS %.0f MiB, %s"
          % (f"{total:,}", " (budget hit: %s)" % heap["limit"] if heap["limit"] else "", core_s,
             live_s, (rss or 0) / (1 << 20),
             verdicts.under("core --heap, %d objects" % n, core_s, limit, "%.2f s")))


def bench_diff(n, old, new, verdicts, tmp):
    """`diff` of the live report and the core's: the median of RUNS, its types checked."""
    paths = []
    for name, text in (("old", old), ("new", new)):
        paths.append(os.path.join(tmp, name + ".json"))
        with open(paths[-1], "w") as f:
            f.write(text)
    times, d = [], None
    for _ in range(RUNS):
        t, proc = timed(["diff", *paths, "--json"])
        times.append(t)
        try:
            d = json.loads(proc.stdout)["heap_diff"] if proc.returncode == 0 else None
        except (ValueError, KeyError):
            d = None
        if not d or not any(t["type"] == "__main__.Item" for t in d["types"]):
            verdicts.failed("diff, %d objects" % n, "no heap_diff with the Item type")
            return
    s = statistics.median(times)
    print("diff of two %s-object reports: %.3f s, %s"
          % (f"{n:,}", s, verdicts.under("diff, %d objects" % n, s, 1.0, "%.3f s")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--big", action="store_true", help="also 10,000,000 objects")
    args = ap.parse_args()
    if not os.access(CLI, os.X_OK):
        print("no CLI at %s (make build)" % CLI)
        return 2
    verdicts = Verdicts()
    with tempfile.TemporaryDirectory(prefix="pyunwind-bench-heap-") as tmp:
        try:
            bench(args.python, 1_000_000, 2.0, verdicts, tmp)
            if args.big:
                bench(args.python, 10_000_000, 20.0, verdicts, tmp)
        except subprocess.TimeoutExpired as exc:
            verdicts.failed("--heap", "timed out: %s" % exc)
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
