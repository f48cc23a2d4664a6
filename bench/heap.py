#!/usr/bin/env python3
"""Benchmark `--heap` (issues 41 and 51) against its targets:

  1M    `pyunwind core CORE --heap --json` of a gcore core of a process holding 1,000,000
        objects (500,000 instances of a class with two attributes in a list, each with a str;
        the interpreter's own objects on top), the census and its retainers: wall time
        (target < 2 s), and `pid --heap` of the same process, with the objects counted and
        the first retainer (the list, `__main__.ITEMS`) checked. Both under 2 s and 512 MiB
        of peak RSS.
  diff  `pyunwind diff OLD NEW --json` of the 1M process's live report and its core's
        (target < 1 s), its types checked.
  10M   the same with 10,000,000 objects (`--big`, which `make bench` passes: a 1.5 GB process
        and a 1 GB core): wall time (target < 20 s) and peak RSS (target < 4.5 GiB: the census's
        own allowance, 4 GiB, and the stop's 512 MiB). A run that meets a budget must say so
        (`complete: false`, an error naming the limit), and is NOT MEASURED, never met.

Each time is the median of 3 runs, and every run's output is checked (a complete census, every
Item counted, the list first among the retainers): a run that fails is FAILED, and nothing
is timed as if it worked. Exit status 0 when every target was met (bench/verdicts.py).
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


def problem(h, n):
    """Why one run's `heap` does not count the program's objects, or None when it does: the
    census complete, every Item counted, and the list first among the retainers."""
    if not h:
        return "no heap report"
    if not h["complete"]:
        return "the census stopped early: %s" % (h["limit"] or "complete is false")
    items = {t["type"]: t["count"] for t in h["types"]}.get("__main__.Item")
    if items != n // 2:
        return "Item instances counted: %r, want %d" % (items, n // 2)
    first = h["retainers"][0] if h["retainers"] else None
    if not (first and first["len"] == n // 2 and first["held_by"] == [
            {"module": "__main__"}, {"attr": "ITEMS"}]):
        return "first retainer: %r" % first
    return None


def runs(args, n, what, verdicts):
    """RUNS timed runs of the CLI with `args`, each one's output checked: (median seconds,
    last heap, last stdout), or None (and the verdict) when a run did not count the objects:
    a run that does not is never timed as if it worked. A census stopped at a budget is no
    measurement of the target either."""
    times, h, proc = [], None, None
    for i in range(RUNS):
        t, proc = timed(args)
        h = heap_of(proc)
        why = problem(h, n)
        if why is not None:
            if h and not h["complete"] and h["limit"]:
                verdicts.not_measured(what, "run %d: %s" % (i + 1, why))
            else:
                verdicts.failed(what, "run %d: %s" % (i + 1, why), proc.stderr[-2000:])
            return None
        times.append(t)
    return statistics.median(times), h, proc.stdout


def bench(python, n, limit, rss_limit, verdicts, tmp):
    """`pid --heap` and `core --heap` of a process holding `n` objects: each under `limit`
    seconds and `rss_limit` bytes of peak RSS."""
    child = subprocess.Popen([python, "-c", PROGRAM, str(n)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            verdicts.failed("%d objects" % n, "the target did not start")
            return
        live = runs(["pid", child.pid, "--heap", "--json"], n, "pid --heap, %d objects" % n,
                    verdicts)
        live_rss = peak_rss(["pid", child.pid, "--heap", "--json"])
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
    dead = runs(["core", core, "--heap", "--json"], n, "core --heap, %d objects" % n, verdicts)
    core_rss = peak_rss(["core", core, "--heap", "--json"])
    os.unlink(core)
    if live and dead:
        bench_diff(n, live[2], dead[2], verdicts, tmp)
    for what, got, rss in (("core", dead, core_rss), ("pid", live, live_rss)):
        if not got:
            continue
        seconds, h, _ = got
        mib = "%.0f MiB" % (rss / (1 << 20)) if rss else "unmeasured"
        name = "%s --heap, %d objects" % (what, n)
        print("heap %s objects, %s: %.2f s, %s; peak RSS %s, %s"
              % (f"{h['objects']:,}", what, seconds,
                 verdicts.under(name, seconds, limit, "%.2f s"), mib,
                 verdicts.under(name + " peak RSS", rss / (1 << 20), rss_limit / (1 << 20),
                                "%.0f MiB") if rss else "NOT MEASURED"))
        if not rss:
            verdicts.not_measured(name + " peak RSS", "the CLI did not exit 0 under the probe")


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
            bench(args.python, 1_000_000, 2.0, 512 << 20, verdicts, tmp)
            if args.big:
                bench(args.python, 10_000_000, 20.0, 9 << 29, verdicts, tmp)
        except subprocess.TimeoutExpired as exc:
            verdicts.failed("--heap", "timed out: %s" % exc)
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
