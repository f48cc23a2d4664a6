#!/usr/bin/env python3
"""Benchmark the asyncio views on a core of 10,000 sleeping tasks under one gather.

For each interpreter, tests/scenarios/asyncio/cases.py runs its `many` case (10,000 tasks,
each `sleep <- sleeper`, all awaited by Task-1), is dumped with gcore and killed. Then, on the
same core, median of REPEAT runs:

  gdb start-up   gdb -q -batch -nx PYTHON CORE                     (loading the core)
  py-bt-async    gdb ... -x gdb-scripts/pyunwind-gdb.py -ex py-bt-async
  py-tasks       gdb ... -ex py-tasks                               (tree and table)
  CLI --async    target/release/pyunwind core CORE --async
  CLI --tasks    target/release/pyunwind core CORE --tasks

and prints each time, the gdb times beyond start-up, and the target (under 1 s beyond
start-up). Every run's output (written to a file, as every run here: `run_to_file`) is
checked to list all 10,000 tasks.

On 3.14 and 3.15 the last column times CPython's own `python -m asyncio ps PID` on the live
program, beside our CLI on the same live program (`pid --tasks --json`).

Then the scale table (`bench/many_tasks.py`, Debian sid's 3.14 and 3.15): 10,000 and 100,000
sleeping tasks under one gather, and the same with 1% more tasks running nested on the loop
thread's stack (eager tasks). Our `core --tasks --json` on a gcore core (best of SCALE_REPEAT),
checked to list every task, and the same with `--why` (every task's wait, the groups); `asyncio
ps` on the live program; the ratio 100k/10k (linear growth: at most 15) and the targets
(100,000 tasks listed within 0.25 s, with `--why` within 0.5 s).

`asyncio ps` is a peer: when it fails, its cell says so and the run is not a pass (a
measurement not made), except past 65,536 tasks, which it refuses by design (its
"Task list appears corrupted" check): that is listed as a limit of the peer. Stdlib only; exit
status (bench/verdicts.py) 1 when a run of ours fails, a target is missed or a measurement
could not be made, each named on a `bench: FAILED|NOT MEASURED|MISSED: ...` line at the end.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from verdicts import Verdicts  # noqa: E402

TASKS = 10000
REPEAT = 3
TIMEOUT = 300
TARGET_S = 1.0
INTERPS = ("debian-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.14", "debian-3.15")
SCALE_INTERPS = ("debian-3.14", "debian-3.15")
SCALE = (10000, 100000)
# Issue 49: 100,000 tasks listed (`--tasks --json`, and the text a user reads, `--tasks`) within
# 0.25 s, with every task's wait and the groups (`--why --tasks --json`) within 0.5 s.
SCALE_TARGET_S = 0.25
WHY_TARGET_S = 0.5
MAX_RATIO = 15
# The scale table takes the best of SCALE_REPEAT runs, not a median: its ratio divides by the
# 10,000-task time, about 40 ms, where a pause of a few ms (noise only ever adds time) moved the
# median ratio from 12x to 18x between runs of one afternoon.
SCALE_REPEAT = 7
# CPython's _remote_debugging module, which `asyncio ps` reads tasks with, stops walking a task
# list after 2 << 15 nodes (MAX_ITERATIONS) and raises this: a limit of the peer, not a
# measurement that went wrong.
PS_MAX_TASKS = 65536
PS_REFUSAL = "Task list appears corrupted"
GDB = ["gdb", "-q", "-batch", "-nx", "-iex", "set auto-load off",
       "-iex", "set debuginfod enabled off"]


class Failure(Exception):
    """A run of ours did not list what it must; the message says why."""


def run_to_file(argv):
    """(seconds, completed process) of one run of `argv`, its standard output written to a
    file and read (as text) once the clock has stopped: through a pipe, the time would be
    this script's reading too (100,000 tasks are 60 MB of JSON, which `subprocess.run(text=
    True)` also decodes before it returns), as `pyunwind ... > out.json` does not."""
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        p = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, timeout=TIMEOUT)
        took = time.monotonic() - start
        out.seek(0)
        p.stdout = out.read().decode("utf-8", "replace")
    p.stderr = p.stderr.decode("utf-8", "replace")
    return took, p


def timed(argv, check, repeat=REPEAT, best=False):
    """The median (or best) of `repeat` runs of `argv` (`run_to_file`), each checked by
    `check`."""
    times = []
    for _ in range(repeat):
        took, p = run_to_file(argv)
        times.append(took)
        problem = check(p)
        if problem:
            raise Failure("%s: %s\n%s" % (" ".join(argv), problem, p.stderr[-2000:]))
    return min(times) if best else statistics.median(times)


def count(text, needle):
    return sum(1 for line in text.splitlines() if needle in line)


def lists_all(marker):
    def check(p):
        if p.returncode != 0:
            return "exit %d" % p.returncode
        n = count(p.stdout, marker)
        return None if n >= TASKS else "%d task lines, expected %d" % (n, TASKS)
    return check


def ok(p):
    return None if p.returncode == 0 else "exit %d" % p.returncode


def stdlib_ps(interp, pid, tasks, verdicts):
    """`python3.1X -m asyncio ps PID` on a program of `tasks` tasks: (seconds, rows printed),
    (None, why) on 3.13 and older (it has none), or (seconds, "failed: ...") after recording
    why in verdicts."""
    if interp.minor < 14:
        return None, "needs 3.14"
    what = "%s: python -m asyncio ps of %d tasks" % (interp.id, tasks)
    try:
        took, p = run_to_file([interp.exe, "-m", "asyncio", "ps", str(pid)])
    except subprocess.TimeoutExpired:
        verdicts.not_measured(what, "timed out after %d s" % TIMEOUT)
        return TIMEOUT, "failed: timed out"
    said = (p.stdout + p.stderr).strip()
    if p.returncode == 0:
        # One row per task: fewer, and the time is not that of listing them all.
        rows = count(p.stdout, "0x")
        if rows >= tasks:
            return took, rows
        verdicts.not_measured(what, "%d rows printed" % rows)
        return took, "failed: %d rows" % rows
    if tasks > PS_MAX_TASKS and PS_REFUSAL in said:
        verdicts.peer_limit(what, "it refuses more than %d tasks (%r)" % (PS_MAX_TASKS,
                                                                          PS_REFUSAL))
    else:
        verdicts.not_measured(what, "exit %d: %s" % (p.returncode, said[-200:]))
    return took, "failed: " + said[-80:]


def json_tasks(n):
    def check(p):
        if p.returncode != 0:
            return "exit %d" % p.returncode
        got = len(json.loads(p.stdout)["tasks"])
        return None if got == n else "%d tasks listed, expected %d" % (got, n)
    return check


def text_tasks(n):
    """`--tasks` text: one tree line per task (`(T) name [0x…]`) and one table row each."""
    def check(p):
        if p.returncode != 0:
            return "exit %d" % p.returncode
        got = count(p.stdout, "(T) ")
        rows = count(p.stdout, "  pending")
        if got != n or rows != n:
            return "%d tree lines and %d table rows, expected %d each" % (got, rows, n)
        return None
    return check


def main():
    all_interps = harness.interpreters() + harness.provisioned_interpreters()
    by_id = {i.id: i for i in all_interps}
    script = os.path.join(REPO, "tests", "scenarios", "asyncio", "cases.py")
    gdb_script = os.path.join(REPO, "gdb-scripts", "pyunwind-gdb.py")
    cli = str(harness.cli_path())
    rows, verdicts = [], Verdicts()
    for iid in INTERPS:
        try:
            interp = by_id[iid]
            with harness.Scenario(interp, "asyncio-many", script=script, args=("many", "c"),
                                  env={"PYUNWIND_TASKS": str(TASKS)}) as s:
                live = timed([cli, "pid", str(s.pid), "--tasks", "--json"],
                             json_tasks(TASKS + 1))
                ps = stdlib_ps(interp, s.pid, TASKS + 1, verdicts)
                core = s.make_core()
                size = os.path.getsize(core)
                base = timed(GDB + [interp.exe, core], ok)
                ours = GDB + ["-x", gdb_script]
                bt_async = timed(ours + ["-ex", "py-bt-async", interp.exe, core],
                                 lists_all('Task "w'))
                tasks = timed(ours + ["-ex", "py-tasks", interp.exe, core], lists_all("(T) w"))
                cli_async = timed([cli, "core", core, "--async"], lists_all('Task "w'))
                cli_tasks = timed([cli, "core", core, "--tasks"], lists_all("(T) w"))
        except (Failure, KeyError, harness.HarnessError, subprocess.TimeoutExpired) as e:
            verdicts.failed("%s: %d tasks" % (iid, TASKS), e, detail=e)
            continue
        rows.append((iid, size, base, bt_async, tasks, cli_async, cli_tasks, live, ps))
    print("asyncio: %d sleeping tasks under one gather, from a gcore core (median of %d)"
          % (TASKS, REPEAT))
    head = ("python", "core MiB", "gdb start", "py-bt-async", "beyond", "py-tasks", "beyond",
            "CLI --async", "CLI --tasks", "live: CLI --tasks --json", "live: asyncio ps")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    verdict_lines = []
    for iid, size, base, a, t, ca, ct, live, (ps_s, ps_rows) in rows:
        worst = max(a - base, t - base, ca, ct)
        word = verdicts.under("%s: %d tasks listed (the slowest of py-bt-async and py-tasks "
                              "beyond start-up, CLI --async and --tasks)" % (iid, TASKS),
                              worst, TARGET_S, "%.2f s")
        verdict_lines.append("%s: worst %.2f s: %s" % (iid, worst, word))
        if ps_s is None:
            ps_text = ps_rows
        elif isinstance(ps_rows, int):
            ps_text = "%.2f s (%d rows, %.1fx ours)" % (ps_s, ps_rows, ps_s / live)
        else:
            ps_text = "%.2f s, %s" % (ps_s, ps_rows)
        print("| %s | %.0f | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s | "
              "%.2f s | %s |" % (iid, size / 2**20, base, a, a - base, t, t - base, ca, ct, live,
                                 ps_text))
    print("target: under %.1f s beyond start-up: %s" % (TARGET_S, "; ".join(verdict_lines)))
    scale(by_id, cli, verdicts)
    return verdicts.finish()


def scale(by_id, cli, verdicts):
    """10k and 100k tasks, sleeping under one awaiter, and with 1% of them on-CPU."""
    program = os.path.join(BENCH_DIR, "many_tasks.py")
    print()
    print("asyncio at scale: `pyunwind core CORE --tasks --json` (best of %d), every task "
          "listed; `python -m asyncio ps` on the same live program" % SCALE_REPEAT)
    head = ("python", "tasks", "on-CPU", "core MiB", "CLI core --tasks --json",
            "CLI core --tasks", "CLI core --why --tasks --json", "asyncio ps")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    words = []
    for iid in SCALE_INTERPS:
        interp = by_id.get(iid)
        for on_cpu_share in (0, 100):
            times = {}
            for n in SCALE:
                on_cpu = n // on_cpu_share if on_cpu_share else 0
                tasks = n + on_cpu + 1
                what = "%s: core --tasks --json of %d tasks (%d on-CPU)" % (iid, tasks, on_cpu)
                try:
                    if interp is None:
                        raise Failure("no interpreter %s (make pythons)" % iid)
                    with harness.Scenario(interp, "bench-many-tasks", script=program,
                                          args=(n, on_cpu), timeout=300) as s:
                        ps_s, ps_rows = stdlib_ps(interp, s.pid, tasks, verdicts)
                        core = s.make_core()
                        size = os.path.getsize(core)
                        try:
                            t = timed([cli, "core", core, "--tasks", "--json"], json_tasks(tasks),
                                      repeat=SCALE_REPEAT, best=True)
                            text_t = timed([cli, "core", core, "--tasks"], text_tasks(tasks),
                                           repeat=SCALE_REPEAT, best=True)
                            why_t = timed([cli, "core", core, "--why", "--tasks", "--json"],
                                          json_tasks(tasks), repeat=SCALE_REPEAT, best=True)
                        finally:
                            os.unlink(core)
                except (Failure, harness.HarnessError, subprocess.TimeoutExpired) as e:
                    verdicts.failed(what, e, detail=e)
                    continue
                times[n] = t
                ps_text = "%.2f s (%s rows)" % (ps_s, ps_rows) if isinstance(ps_rows, int) \
                    else "%.2f s, %s" % (ps_s, ps_rows)
                print("| %s | %d | %d | %.0f | %.2f s | %.2f s | %.2f s | %s |"
                      % (iid, tasks, on_cpu + (1 if on_cpu else 0), size / 2**20, t, text_t,
                         why_t, ps_text))
                if n == SCALE[-1]:
                    words.append("%s %d tasks: %s" % (iid, tasks, verdicts.at_most(
                        what, t, SCALE_TARGET_S, "%.2f s")))
                    words.append("%s %d tasks as text: %s" % (iid, tasks, verdicts.at_most(
                        what.replace(" --json", ""), text_t, SCALE_TARGET_S, "%.2f s")))
                    words.append("%s %d tasks with --why: %s" % (iid, tasks, verdicts.at_most(
                        what + " --why", why_t, WHY_TARGET_S, "%.2f s")))
            if all(n in times for n in SCALE):
                ratio = times[SCALE[1]] / times[SCALE[0]]
                print("| %s | ratio %dk/%dk | | | %.1fx (at most %d) | | | |"
                      % (iid, SCALE[1] // 1000, SCALE[0] // 1000, ratio, MAX_RATIO))
                words.append("%s ratio: %s" % (iid, verdicts.at_most(
                    "%s: core --tasks --json, %dk tasks over %dk (%d%% on-CPU)"
                    % (iid, SCALE[1] // 1000, SCALE[0] // 1000,
                       100 // on_cpu_share if on_cpu_share else 0),
                    ratio, MAX_RATIO, "%.1fx")))
    print("target: 100,000 tasks within %.2f s (with --why %.2f s), growth at most %dx: %s"
          % (SCALE_TARGET_S, WHY_TARGET_S, MAX_RATIO, "; ".join(words)))


if __name__ == "__main__":
    sys.exit(main())
