#!/usr/bin/env python3
"""`bt` time with and without pyunwind's JIT unwinder registered, on a core of a deep
native+Python stack (bench/jit_deep.py N), for each interpreter given.

gdb loads pyunwind once; a gdb-side Python loop then times `bt -no-filters` (unwinding alone)
and `bt` (with pyunwind's frame filter), alternating unwinder on (`enable unwinder`) and off
(`disable unwinder global pyunwind-jit`), flushing gdb's frame cache before every run. Each
time is the median of ROUNDS runs. Every `bt` with the unwinder on is checked to show
exactly N `recurse` frames. Target: unwinder on costs under 5% more.

Usage: python3 bench/jit_unwinder_bench.py [--depth N] [--rounds K] [PYTHON...]
(default: Debian sid's python3.14 with the JIT on, and /usr/bin/python3.11). Exit status
(bench/verdicts.py) 1 if a run fails, a target is missed or a time could not be measured, each
named on a `bench: FAILED|NOT MEASURED|MISSED: ...` line at the end, 0 otherwise. Stdlib only.
"""

import argparse
import os
import subprocess
import sys
import tempfile

from verdicts import Verdicts

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
GDB_SCRIPT = os.path.join(REPO, "gdb-scripts", "pyunwind-gdb.py")
SID = os.path.join(os.environ.get("PYUNWIND_CACHE") or os.path.expanduser("~/.cache/pyunwind"),
                   "pythons", "debian-sid")
DEFAULT_PYTHONS = (os.path.join(SID, "usr", "bin", "python3.14"), "/usr/bin/python3.11")
TARGET_OVERHEAD = 0.05

# Per command: (median seconds on, off, gdb frames on, off, and the fewest and most `recurse`
# frames among the runs with the unwinder on). `bt`'s Python frames come from our frame filter:
# '#7  recurse () at .../jit_deep.py:16', or the same without a number.
TIMER = r'''
import re, statistics, time, gdb
RECURSE = re.compile(r"^(?:#\d+\s+)?recurse \(", re.M)
def once(cmd):
    gdb.execute("maint flush register-cache", to_string=True)
    t = time.perf_counter()
    out = gdb.execute(cmd, to_string=True)
    return time.perf_counter() - t, out.count("\n#"), len(RECURSE.findall(out))
res = {}
for cmd in ("bt -no-filters", "bt"):
    on, off = [], []
    for _ in range(ROUNDS):
        gdb.execute("enable unwinder global pyunwind-jit", to_string=True)
        on.append(once(cmd))
        gdb.execute("disable unwinder global pyunwind-jit", to_string=True)
        off.append(once(cmd))
    gdb.execute("enable unwinder global pyunwind-jit", to_string=True)
    res[cmd] = (statistics.median(r[0] for r in on), statistics.median(r[0] for r in off),
                on[0][1], off[0][1], min(r[2] for r in on), max(r[2] for r in on))
print("@@RESULT@@%r" % (res,))
'''


class Failure(Exception):
    pass


def core_of(python, depth, tmp):
    env = dict(os.environ, PYTHON_JIT="1", MALLOC_ARENA_MAX="1")
    p = subprocess.Popen([python, os.path.join(BENCH, "jit_deep.py"), str(depth)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        line = p.stdout.readline().decode()
        if not line.startswith("ready"):
            raise Failure("%s did not get ready: %r" % (python, line))
        prefix = os.path.join(tmp, "core")
        subprocess.run(["gcore", "-o", prefix, str(p.pid)], check=True, capture_output=True)
        return prefix + ".%d" % p.pid
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=300)
    # 11, not 5: a pause of gdb's own (tens of ms, its Python's collector or fresh pages) lands
    # on whichever run it hits, and two of them among 5 runs with the unwinder on moved the
    # median by 15% on one row of one run in three; among 11 they do not.
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("pythons", nargs="*", default=DEFAULT_PYTHONS)
    a = ap.parse_args()
    verdicts = Verdicts()
    print("JIT unwinder cost on `bt` (core of bench/jit_deep.py %d, median of %d)" % (a.depth, a.rounds))
    print("%-28s %-15s %7s %9s %9s %8s" % ("python", "command", "frames", "off s", "on s", "extra"))
    for python in a.pythons:
        name = os.path.basename(python)
        if not os.access(python, os.X_OK):
            verdicts.not_measured(name, "%s is missing (make pythons)" % python)
            continue
        with tempfile.TemporaryDirectory(prefix="pyunwind-jitbench-") as tmp:
            try:
                core = core_of(python, a.depth, tmp)
            except (Failure, subprocess.SubprocessError) as e:
                verdicts.failed("%s: core of jit_deep.py %d" % (name, a.depth), e, detail=e)
                continue
            debug = os.path.join(SID, "usr", "lib", "debug") if SID in python else "/usr/lib/debug"
            script = os.path.join(tmp, "timer.py")
            with open(script, "w") as f:
                f.write(TIMER.replace("ROUNDS", str(a.rounds)))
            try:
                r = subprocess.run(["gdb", "-q", "-batch", "-nx", "-iex", "set auto-load off",
                                    "-iex", "set debuginfod enabled off",
                                    "-iex", "set debug-file-directory %s" % debug,
                                    "-x", GDB_SCRIPT, "-x", script, python, core],
                                   capture_output=True, text=True, timeout=1800)
            except subprocess.TimeoutExpired:
                verdicts.failed("%s: gdb" % name, "timed out after 1800 s")
                continue
            if "@@RESULT@@" not in r.stdout:
                verdicts.failed("%s: gdb" % name, "no result line (exit %d)" % r.returncode,
                                detail="%s\n%s" % (r.stdout[-2000:], r.stderr[-2000:]))
                continue
            res = eval(r.stdout.split("@@RESULT@@", 1)[1].splitlines()[0])
            for cmd, (on, off, n_on, n_off, fewest, most) in res.items():
                what = "%s: `%s` with the JIT unwinder over without" % (name, cmd)
                if cmd == "bt" and not fewest == most == a.depth:
                    verdicts.failed(what, "%d to %d recurse frames with the unwinder on, "
                                          "expected %d" % (fewest, most, a.depth))
                    continue
                extra = on / off - 1 if off > 0 else None
                word = verdicts.under(what, None if extra is None else 100 * extra,
                                      100 * TARGET_OVERHEAD, "%+.1f%%",
                                      why_not="no time without the unwinder")
                mark = "" if word == "met" else "  (target < %d%%: %s)" % (TARGET_OVERHEAD * 100,
                                                                          word)
                print("%-28s %-15s %7d %9.3f %9.3f %+7.1f%%%s" % (
                    name, cmd, n_on, off, on, 100 * (extra or 0.0), mark))
                if n_on != n_off and cmd == "bt -no-filters":
                    print("  note: %d frames with the unwinder, %d without" % (n_on, n_off))
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
