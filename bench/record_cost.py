#!/usr/bin/env python3
"""Benchmark what sampling costs the process sampled (issue 52 item 4): `pyunwind record` at
100 Hz must cost a 64-thread CPU-bound process under 5% of its throughput. `py-spy record
--rate 100` (bench/setup.sh's venv) is measured beside it on the same target.

The target (TARGET below, run by Debian's /usr/bin/python3.11) starts 64 threads that each
compute work units (a small sum, a few Python frames deep) as fast as they can and count them.
It measures its own throughput: for each line `mark` the bench writes to its stdin, it prints
`mark MONOTONIC UNITS` (the clock and the units done by every thread so far), so a window's
throughput is the difference of two marks over the difference of their times, the program's
own record. The bench never counts.

Three modes, a WINDOW_S window each, in turns (none, ours, py-spy; then again, RUNS times), so
that a drift of the machine's load falls on all three alike:

  none     nothing samples the target
  ours     `pyunwind record PID --rate 100 --format collapsed` runs over the window
  py-spy   `py-spy record --pid PID --rate 100 --format raw` runs over the window (it stops the
           target at each sample; py-spy's --nonblocking would not)

A profiler starts SETTLE_S before the first mark (it finds the interpreter, attaches) and
ends after the second. Its own CPU time over its run (getrusage of the children) is printed
beside it: on a small machine that time is taken from the cores the target runs on. Every
profile is checked (stacks were written), ours's rate achieved (its `--json` summary) is
printed and must be at least MIN_RATE_SHARE of the rate asked, and py-spy's `Samples:` line and
how far behind it fell are printed.

The cost is 1 - median(throughput with the profiler) / median(throughput with none), in %.
The spread (lowest and highest window of each mode) is printed: on a machine shared with other
work a window's throughput moves by a few % with the load, so the medians are compared and a
cost below the spread of `none` is noise. What the spread cannot hide is printed after it: each
profiler's CPU time over its run as a share of the CPUs the target runs on (the CPU it takes
from the target's machine, whatever else runs there; it leaves out what stopping the target
costs py-spy, and the memory bandwidth both take). Exit status (bench/verdicts.py): 0 when ours was
measured and met both targets, 1 when a run failed, the target was missed or py-spy could not be
measured, 2 for a missing build, interpreter or py-spy. Stdlib only.
"""

import argparse
import json
import os
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import time

from verdicts import Verdicts

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
CLI = os.environ.get("PYUNWIND_CLI") or os.path.join(REPO, "target", "release", "pyunwind")
CACHE = os.environ.get("PYUNWIND_CACHE") or os.path.expanduser("~/.cache/pyunwind")
PY_SPY = os.path.join(CACHE, "bench-venv", "bin", "py-spy")
PYTHON = "/usr/bin/python3.11"
THREADS = 64
RATE_HZ = 100
WINDOW_S = 5.0
RUNS = 5
# The CPUs the target's threads run on: what a profiler's CPU time is taken from.
TARGET_CPUS = min(os.cpu_count() or 1, THREADS)
# A profiler's start (finding the interpreter, attaching) before the window begins.
SETTLE_S = 1.0
# Target: ours costs the process under this share of its throughput.
MAX_COST = 0.05
# Target: ours samples at least this share of the rate asked (else the cost is not of 100 Hz).
MIN_RATE_SHARE = 0.9
READY_TIMEOUT_S = 60.0
MARK_TIMEOUT_S = 30.0
PROFILER_TIMEOUT_S = 60.0

TARGET = r"""
import sys, threading, time

THREADS = int(sys.argv[1])
counts = [0] * THREADS
started = threading.Barrier(THREADS + 1)


def unit():
    return sum(i * i for i in range(200))


def step():
    return unit()


def worker(k):
    started.wait()
    while True:
        step()
        counts[k] += 1  # each thread its own slot: no lock, no lost count


for k in range(THREADS):
    threading.Thread(target=worker, args=(k,), name="worker-%d" % k, daemon=True).start()
started.wait()
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "mark":
        print("mark %.6f %d" % (time.monotonic(), sum(counts)), flush=True)
"""


class Target:
    """The 64-thread program, and its marks."""

    def __init__(self, python, tmp):
        path = os.path.join(tmp, "throughput.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(TARGET)
        self.proc = subprocess.Popen([python, path, str(THREADS)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.buf = b""
        line = self._line(READY_TIMEOUT_S)
        if line != "ready":
            raise RuntimeError("target not ready: %r" % line)

    def _line(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise RuntimeError("target did not answer within %.0f s" % timeout)
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("target exited: %s" % self.proc.stderr.read().decode()[-500:])
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().strip()

    def mark(self):
        """(the target's clock, its units so far)."""
        self.proc.stdin.write(b"mark\n")
        self.proc.stdin.flush()
        word, at, units = self._line(MARK_TIMEOUT_S).split()
        assert word == "mark"
        return float(at), int(units)

    def close(self):
        self.proc.kill()
        self.proc.wait()


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def profiler_argv(mode, pid, out):
    duration = str(int(SETTLE_S + WINDOW_S + 2))
    if mode == "ours":
        return [CLI, "record", str(pid), "--rate", str(RATE_HZ), "--duration", duration,
                "--format", "collapsed", "-o", out, "--json"]
    return [PY_SPY, "record", "--pid", str(pid), "--rate", str(RATE_HZ), "--duration",
            duration, "--format", "raw", "-o", out]


def check_profile(mode, out_path, stdout, stderr):
    """(the rate ours achieved or None, words for the profiler's line); raises RuntimeError
    when no stack was written."""
    lines = 0
    if os.path.exists(out_path):
        with open(out_path, encoding="utf-8", errors="replace") as f:
            lines = sum(1 for line in f if line.strip())
    if lines == 0:
        raise RuntimeError("%s wrote no stacks: %s" % (mode, (stdout + stderr).strip()[-300:]))
    if mode == "ours":
        summary = json.loads(stdout)["record"]
        rate = summary["rate_hz"]
        return rate, "%.1f Hz achieved, %d torn, %d stacks" % (rate, summary["torn"], lines)
    # py-spy prints `... Samples: N Errors: M` on stdout and, when it cannot keep up, `Ns
    # behind in sampling` lines on stderr.
    said = [line.split("'. ")[-1] for line in stdout.splitlines() if "Samples:" in line]
    behind = [line.split()[1] for line in stderr.splitlines() if "behind in sampling" in line]
    words = "%s, %d stacks" % (said[-1].strip() if said else "no Samples line", lines)
    if behind:
        words += ", up to %s behind in sampling" % behind[-1]
    return None, words


def window(target, mode, tmp, n):
    """One window in `mode`: (units per second, the profiler's CPU seconds, the share of the
    machine's CPUs it took over its run, the rate ours achieved, the profiler's words)."""
    prof = None
    before = children_cpu_s()
    began = time.monotonic()
    out_path = os.path.join(tmp, "%s-%d.txt" % (mode, n))
    if mode != "none":
        prof = subprocess.Popen(profiler_argv(mode, target.proc.pid, out_path),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(SETTLE_S)
        if prof.poll() is not None:
            raise RuntimeError("%s ended before the window: %s" % (mode, prof.stderr.read()[-300:]))
    t0, u0 = target.mark()
    time.sleep(WINDOW_S)
    t1, u1 = target.mark()
    rate = (u1 - u0) / (t1 - t0)
    if prof is None:
        return rate, None, None, None, ""
    try:
        stdout, stderr = prof.communicate(timeout=PROFILER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        prof.kill()
        prof.communicate()
        raise RuntimeError("%s did not end within %.0f s" % (mode, PROFILER_TIMEOUT_S))
    if prof.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (mode, prof.returncode, stderr.strip()[-300:]))
    cpu = children_cpu_s() - before
    share = cpu / ((time.monotonic() - began) * TARGET_CPUS)
    achieved, words = check_profile(mode, out_path, stdout, stderr)
    return rate, cpu, share, achieved, words


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=PYTHON)
    ap.add_argument("--runs", type=int, default=RUNS)
    args = ap.parse_args()
    for what, path in [("pyunwind build (make build)", CLI), ("interpreter", args.python),
                       ("py-spy (bash bench/setup.sh)", PY_SPY)]:
        if not os.access(path, os.X_OK):
            print("record_cost: missing %s: %s" % (what, path), file=sys.stderr)
            return 2
    verdicts = Verdicts()
    modes = ("none", "ours", "py-spy")
    rates = {m: [] for m in modes}
    cpu = {m: [] for m in modes}
    shares = {m: [] for m in modes}
    achieved_hz = []
    failed = set()
    print("record_cost: %d CPU-bound threads (%s), %d Hz, %d windows of %.0f s per mode, "
          "%d CPU(s)" % (THREADS, args.python, RATE_HZ, args.runs, WINDOW_S, os.cpu_count()))
    with tempfile.TemporaryDirectory(prefix="record-cost-") as tmp:
        target = Target(args.python, tmp)
        try:
            for n in range(args.runs):
                for mode in modes:
                    if mode in failed:
                        continue
                    try:
                        rate, used, share, achieved, words = window(target, mode, tmp, n)
                    except RuntimeError as e:
                        failed.add(mode)
                        if mode == "ours":
                            verdicts.failed("pyunwind record at %d Hz" % RATE_HZ, str(e))
                        else:
                            verdicts.not_measured("py-spy record at %d Hz" % RATE_HZ, str(e))
                        continue
                    rates[mode].append(rate)
                    if achieved is not None:
                        achieved_hz.append(achieved)
                    line = "  run %d %-7s %10.0f units/s" % (n + 1, mode, rate)
                    if used is not None:
                        cpu[mode].append(used)
                        shares[mode].append(share)
                        line += "   profiler CPU %.2f s (%s)" % (used, words)
                    print(line, flush=True)
        finally:
            target.close()
    base = statistics.median(rates["none"]) if rates["none"] else None
    print("\n%-8s %12s %12s %12s %9s %14s" % ("mode", "median/s", "lowest/s", "highest/s",
                                                "ratio", "profiler CPU"))
    cost = {}
    for mode in modes:
        if not rates[mode]:
            continue
        med = statistics.median(rates[mode])
        ratio = med / base if base else None
        cost[mode] = None if ratio is None else 1.0 - ratio
        used = ("%.2f s/window" % statistics.median(cpu[mode])) if cpu[mode] else "-"
        print("%-8s %12.0f %12.0f %12.0f %9s %14s" % (
            mode, med, min(rates[mode]), max(rates[mode]),
            "-" if ratio is None else "%.3f" % ratio, used))
    if base:
        spread = (max(rates["none"]) - min(rates["none"])) / base
        print("\nspread of the windows without a profiler: %.1f%% of their median "
              "(a cost below it is noise)" % (100 * spread))
    for mode in ("ours", "py-spy"):
        if mode in cost and cost[mode] is not None:
            print("cost of %s at %d Hz: %.1f%% of the target's throughput"
                  % (mode, RATE_HZ, 100 * cost[mode]))
    # What the throughput's spread cannot hide: the CPU time a profiler takes from the CPUs
    # the target runs on, over its run (start included), whatever else runs on the machine.
    for mode in ("ours", "py-spy"):
        if shares[mode]:
            print("CPU of %s over its run: %.1f%% of the %d CPU(s) the target runs on (median)"
                  % (mode, 100 * statistics.median(shares[mode]), TARGET_CPUS))
    if "ours" not in failed:
        # The cost is of 100 Hz only where ours kept up with it (a sample of 64 threads that
        # takes more than 10 ms makes the next one late: fewer samples a second).
        verdicts.at_least("pyunwind record: rate achieved of %d Hz asked" % RATE_HZ,
                          statistics.median(achieved_hz) if achieved_hz else None,
                          MIN_RATE_SHARE * RATE_HZ, "%.1f Hz", why_not="no windows measured")
        verdicts.under("pyunwind record at %d Hz: cost to a %d-thread process"
                       % (RATE_HZ, THREADS), cost.get("ours"), MAX_COST, "%.3f",
                       why_not="no windows measured")
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
