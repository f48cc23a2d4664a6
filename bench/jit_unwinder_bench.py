#!/usr/bin/env python3
"""`bt` time with and without pyunwind's JIT unwinder registered, on a core of a deep
native+Python stack (bench/jit_deep.py N), for each interpreter given.

gdb loads pyunwind once; a gdb-side Python loop then times `bt -no-filters` (unwinding alone)
and `bt` (with pyunwind's frame filter), alternating unwinder on (`enable unwinder`) and off
(`disable unwinder global pyunwind-jit`), flushing gdb's frame cache before every run. Each
time is the median of ROUNDS runs. Target: unwinder on costs under 5% more.

Usage: python3 bench/jit_unwinder_bench.py [--depth N] [--rounds K] [PYTHON...]
(default: Debian sid's python3.14 with the JIT on, and /usr/bin/python3.11). Exit 1 if a run
fails, 0 otherwise (a missed target is a result, printed). Stdlib only.
"""

import argparse
import os
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
GDB_SCRIPT = os.path.join(REPO, "gdb-scripts", "pyunwind-gdb.py")
SID = os.path.join(os.environ.get("PYUNWIND_CACHE") or os.path.expanduser("~/.cache/pyunwind"),
                   "pythons", "debian-sid")
DEFAULT_PYTHONS = (os.path.join(SID, "usr", "bin", "python3.14"), "/usr/bin/python3.11")
TARGET_OVERHEAD = 0.05

TIMER = r'''
import statistics, time, gdb
def once(cmd):
    gdb.execute("maint flush register-cache", to_string=True)
    t = time.perf_counter()
    out = gdb.execute(cmd, to_string=True)
    return time.perf_counter() - t, out.count("\n#")
res = {}
for cmd in ("bt -no-filters", "bt"):
    on, off = [], []
    for _ in range(ROUNDS):
        gdb.execute("enable unwinder global pyunwind-jit", to_string=True)
        on.append(once(cmd))
        gdb.execute("disable unwinder global pyunwind-jit", to_string=True)
        off.append(once(cmd))
    gdb.execute("enable unwinder global pyunwind-jit", to_string=True)
    res[cmd] = (statistics.median(t for t, _ in on), statistics.median(t for t, _ in off),
                on[0][1], off[0][1])
print("@@RESULT@@%r" % (res,))
'''


def core_of(python, depth, tmp):
    env = dict(os.environ, PYTHON_JIT="1", MALLOC_ARENA_MAX="1")
    p = subprocess.Popen([python, os.path.join(BENCH, "jit_deep.py"), str(depth)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        line = p.stdout.readline().decode()
        if not line.startswith("ready"):
            raise SystemExit("%s did not get ready: %r" % (python, line))
        prefix = os.path.join(tmp, "core")
        subprocess.run(["gcore", "-o", prefix, str(p.pid)], check=True, capture_output=True)
        return prefix + ".%d" % p.pid
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("pythons", nargs="*", default=DEFAULT_PYTHONS)
    a = ap.parse_args()
    failed = False
    print("JIT unwinder cost on `bt` (core of bench/jit_deep.py %d, median of %d)" % (a.depth, a.rounds))
    print("%-28s %-15s %7s %9s %9s %8s" % ("python", "command", "frames", "off s", "on s", "extra"))
    for python in a.pythons:
        with tempfile.TemporaryDirectory(prefix="pyunwind-jitbench-") as tmp:
            core = core_of(python, a.depth, tmp)
            debug = os.path.join(SID, "usr", "lib", "debug") if SID in python else "/usr/lib/debug"
            script = os.path.join(tmp, "timer.py")
            with open(script, "w") as f:
                f.write(TIMER.replace("ROUNDS", str(a.rounds)))
            r = subprocess.run(["gdb", "-q", "-batch", "-nx", "-iex", "set auto-load off",
                                "-iex", "set debuginfod enabled off",
                                "-iex", "set debug-file-directory %s" % debug,
                                "-x", GDB_SCRIPT, "-x", script, python, core],
                               capture_output=True, text=True, timeout=1800)
            if "@@RESULT@@" not in r.stdout:
                print("%s: gdb failed:\n%s\n%s" % (python, r.stdout[-2000:], r.stderr[-2000:]))
                failed = True
                continue
            res = eval(r.stdout.split("@@RESULT@@", 1)[1].splitlines()[0])
            for cmd, (on, off, n_on, n_off) in res.items():
                extra = on / off - 1 if off else 0.0
                mark = "" if extra < TARGET_OVERHEAD else "  (target < %d%% missed)" % (TARGET_OVERHEAD * 100)
                print("%-28s %-15s %7d %9.3f %9.3f %+7.1f%%%s" % (os.path.basename(python), cmd, n_on, off, on,
                                                                100 * extra, mark))
                if n_on != n_off and cmd == "bt -no-filters":
                    print("  note: %d frames with the unwinder, %d without" % (n_on, n_off))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
