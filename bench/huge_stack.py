#!/usr/bin/env python3
"""Benchmark one thread of 100,000 Python frames (issue 27, item 3): the CLI on its core and on
the live process, gdb's `py-bt` and `bt`, lldb 22's `py-bt`, and the peers where they can read
it (pystack core, py-spy dump; libpython's py-bt is left out: at depth 5000 it already takes
13 s, bench/run.py).

For pyenv's 3.12 and Debian sid's 3.14, this file runs itself as the program (see `program`):
`recurse` N = 100,000 deep, then it records its truth and blocks. It is dumped with gcore; then,
best of REPEAT, every run's output checked for exactly N `recurse` frames (the CLI's JSON: every
frame's function and line, nothing truncated):

  CLI core text / --json   target/release/pyunwind core CORE [--json]   (wall clock)
  CLI pid --json           the same on the live process
  gdb py-bt                timed inside gdb, beyond its start-up (bench/run.py says why)
  gdb bt                   timed inside gdb: our frame filter, `bt -no-filters` (gdb's raw bt of
                           the thread's ~25 native frames), and a frame filter that returns
                           the same number of constant decorators (what gdb's frame-filter API
                           costs per printed frame, whoever the filter is: the floor)
  lldb 22 py-bt            timed inside lldb, and a command printing text of the same size
                           through its result object (what lldb's own output costs)
  CLI peak RSS             `core --json`, from the kernel's accounting

Targets: the CLI under 0.1 s, gdb py-bt under 0.2 s, lldb py-bt under 0.5 s, and bt with our
filter within 10% of the floor. Issue 27 asked for bt within 5% of raw bt, which no frame filter
can meet: raw bt prints the ~25 native frames, a filter 100,000 Python frames, and gdb's own
printing of a decorated frame costs about 20 us (the floor is 10-200x raw bt). What a filter
can be held to is what it adds to that floor.

The peers' outputs are checked too (exactly N `recurse` frames). pystack is timed again with a
1 GiB stack when it crashes on the default one (as in bench/run.py); py-spy gives up on a stack
of more than 4,096 frames (its stack_trace.rs), so it cannot dump this one: when it fails while
it dumps the same interpreter 4,000 frames deep, that is listed as a limit of the peer.
Stdlib only; exit status (bench/verdicts.py) 1 when a run of ours fails, a target is missed or
a peer could not be measured otherwise, each named on a `bench: FAILED|NOT MEASURED|MISSED: ...`
line at the end.

    python3 bench/huge_stack.py               the benchmark
    python huge_stack.py TRUTH FIFO program N the program (run by the benchmark)
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import run as bench_run  # bench/run.py: the big stack pystack gets there
from verdicts import Verdicts

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
INTERPS = ("pyenv-3.12", "debian-3.14")
DEPTH = 100_000
REPEAT = 3
BT_REPEAT = 5
TIMEOUT = 300
READY_TIMEOUT = 600
TARGET_CLI_S = 0.1
TARGET_GDB_PYBT_S = 0.2
TARGET_BT_OVER_FLOOR = 1.10
TARGET_LLDB_PYBT_S = 0.5
# `make bench` installs it (tools/lldb-env.sh 22).
LLDB = os.environ.get("PYUNWIND_LLDB", "/usr/bin/lldb-22")


# --- the program ----------------------------------------------------------------------------

def recurse(n):
    if n > 1:
        return recurse(n - 1)
    return block()


def block():
    import _truth
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702


def program(n):
    sys.path.insert(0, os.path.join(REPO, "tests", "scenarios"))
    sys.setrecursionlimit(n + 1000)
    recurse(n)


# --- measuring -----------------------------------------------------------------------------

class Failure(Exception):
    pass


RECURSE_LINE = re.compile(r'File "[^"]*huge_stack\.py", line \d+, in recurse$', re.M)
# pystack: '    (Python) File "/x/huge_stack.py", line 62, in recurse'; py-spy: '    recurse
# (huge_stack.py:62)'.
PYSTACK_RECURSE = re.compile(r'^\s*\(Python\) File "[^"]*huge_stack\.py", line \d+, in recurse$',
                             re.M)
PYSPY_RECURSE = re.compile(r"^\s*recurse \([^)]*huge_stack\.py:\d+\)$", re.M)
BT_RECURSE = re.compile(r"\brecurse \(\) at \S*huge_stack\.py:\d+$", re.M)
TIMED = re.compile(r"^bench-seconds ([0-9.]+)$", re.M)


def run(argv, timeout=TIMEOUT, preexec_fn=None):
    """Standard output goes to a file, as `> out.json` would: through a pipe the time would
    include how fast this script drains 8-12 MB from it."""
    with tempfile.TemporaryFile("w+") as out:
        start = time.monotonic()
        p = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
        took = time.monotonic() - start
        out.seek(0)
        p.stdout = out.read()
    return took, p


def best(argv, check, inside=False, repeat=None):
    """Best of `repeat` (REPEAT) runs: wall clock, or with inside=True the `bench-seconds` the
    run printed (a command timed inside the debugger). check(stdout) raises Failure."""
    times = []
    for _ in range(repeat or REPEAT):
        took, p = run(argv)
        if p.returncode != 0:
            raise Failure("%s: exit %d\n%s" % (argv[0], p.returncode, p.stderr[-2000:]))
        check(p.stdout)
        if inside:
            m = TIMED.findall(p.stdout)
            if not m:
                raise Failure("%s: no bench-seconds line" % argv[0])
            took = float(m[-1])
        times.append(took)
    return min(times)


def count_check(pattern, want, what):
    def check(out):
        n = len(pattern.findall(out))
        if n != want:
            raise Failure("%s: %d recurse frames, expected %d" % (what, n, want))
    return check


def json_check(truth, what):
    want = truth["lines"]

    def check(out):
        report = json.loads(out)
        t = next((t for t in report["threads"] if t.get("native_id") == truth["tid"]), None)
        if t is None or t["truncated"]:
            raise Failure("%s: thread missing or truncated (errors %r)" % (what, report["errors"]))
        got = [f.get("line") for f in t["frames"]
               if f["kind"] == "python" and f.get("function") == "recurse"]
        if got != want:
            raise Failure("%s: %d recurse frames, lines differ from the program's"
                          % (what, len(got)))
    return check


GDB_FLOOR = """
import gdb
from gdb.FrameDecorator import FrameDecorator

class _Constant(FrameDecorator):
    def function(self): return "recurse"
    def filename(self): return "huge_stack.py"
    def line(self): return 1
    def address(self): return None
    def frame_args(self): return None
    def frame_locals(self): return None

class _Floor:
    name, priority, enabled = "bench-floor", 100, True
    def filter(self, it):
        frames = list(it)
        # On the native frame ours shows the Python frames at: gdb's work per printed frame
        # depends on which frame it is (its module, its symbols).
        return iter([_Constant(frames[%d]) for _ in range(%d)] + frames)

gdb.frame_filters["bench-floor"] = _Floor()
"""

LLDB_FLOOR = """
import lldb
TEXT = ("x" * 79 + "\\n") * (%d // 80)

def floor(debugger, command, result, internal_dict):
    result.Print(TEXT)

def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand("command script add -f bench_lldb_floor.floor bench-floor")
"""


def gdb_timed(interp, core, command, script=None):
    clock = "python import time as _t; _t0 = _t.perf_counter()"
    done = "python print('bench-seconds %.6f' % (_t.perf_counter() - _t0))"
    argv = ["gdb", "-q", "-batch", "-nx", "-iex", "set debuginfod enabled off",
            "-iex", "set auto-load python-scripts off"]
    argv += ["-x", script] if script else ["-x", os.path.join(REPO, "gdb-scripts", "pyunwind-gdb.py")]
    return argv + ["-ex", clock, "-ex", command, "-ex", done, interp.exe, core]


def lldb_timed(interp, core, command, script):
    clock = "script import time as _t; _t0 = _t.perf_counter()"
    done = "script print('bench-seconds %.6f' % (_t.perf_counter() - _t0))"
    return [LLDB, "-b", "-o", "command script import %s" % script, "-o", clock, "-o", command,
            "-o", done, "-c", core, interp.exe]


def measure(harness, interp, workdir, peers, verdicts):
    rows = {}
    cli = str(harness.cli_path())
    with harness.Scenario(interp, "bench-huge", script=os.path.abspath(__file__),
                          args=("program", DEPTH), timeout=READY_TIMEOUT) as s:
        deep = max(s.truth["threads"], key=lambda t: len(t["frames"]))
        truth = {"tid": deep["native_id"],
                 "lines": [f["line"] for f in deep["frames"] if f["function"] == "recurse"]}
        if len(truth["lines"]) != DEPTH:
            raise Failure("the program recorded %d recurse frames" % len(truth["lines"]))
        core = s.make_core()
        os.sync()
        rows["core MiB"] = os.path.getsize(core) / 2**20
        rows["CLI core text"] = best([cli, "core", core],
                                     count_check(RECURSE_LINE, DEPTH, "core text"))
        rows["CLI core --json"] = best([cli, "core", core, "--json"], json_check(truth, "core --json"))
        rows["CLI pid --json"] = best([cli, "pid", str(s.pid), "--json"], json_check(truth, "pid --json"))
        rows["CLI peak RSS MiB"] = harness.cli_peak_rss(["core", core, "--json"], workdir)[0] / 2**20
        rows["gdb py-bt"] = best(gdb_timed(interp, core, "py-bt"),
                                 count_check(RECURSE_LINE, DEPTH, "gdb py-bt"), inside=True)
        level = [None]

        def bt_check(out):
            count_check(BT_RECURSE, DEPTH, "gdb bt")(out)
            # The level of the frame the Python frames are shown at: the `#N` line before the
            # first `recurse`.
            before = out[:BT_RECURSE.search(out).start()]
            level[0] = int(re.findall(r"^#(\d+) ", before, re.M)[-1])
        # Ours and the floor in turns, best of BT_REPEAT each: gdb's own printing of 100,000
        # frames varies by 20% from run to run, more than the difference measured.
        best(gdb_timed(interp, core, "bt"), bt_check, inside=True)  # finds the level
        floor = os.path.join(workdir, "bench_gdb_floor.py")
        with open(floor, "w") as f:
            f.write(GDB_FLOOR % (level[0], DEPTH))
        ours, floors = [], []
        for _ in range(BT_REPEAT):
            ours.append(best(gdb_timed(interp, core, "bt"), bt_check, inside=True, repeat=1))
            floors.append(best(gdb_timed(interp, core, "bt", floor), lambda out: None,
                               inside=True, repeat=1))
        rows["gdb bt"] = min(ours)
        rows["gdb bt -no-filters"] = best(gdb_timed(interp, core, "bt -no-filters"),
                                          lambda out: None, inside=True)
        rows["gdb bt, constant filter"] = min(floors)
        lldb_script = os.path.join(REPO, "lldb-scripts", "pyunwind_lldb.py")
        size = [0]

        def lldb_check(out):
            count_check(RECURSE_LINE, DEPTH, "lldb py-bt")(out)
            size[0] = len(out)
        rows["lldb py-bt"] = best(lldb_timed(interp, core, "py-bt", lldb_script), lldb_check,
                                  inside=True)
        floor = os.path.join(workdir, "bench_lldb_floor.py")
        with open(floor, "w") as f:
            f.write(LLDB_FLOOR % size[0])
        rows["lldb, printing as much text"] = best(lldb_timed(interp, core, "bench-floor", floor),
                                                   lambda out: None, inside=True)
        rows["pystack core"] = pystack_core(peers["pystack"], interp, core, verdicts)
        rows["py-spy dump --pid"] = py_spy_dump(peers["py-spy"], interp, s.pid, verdicts)
        os.unlink(core)
    return rows


def peer_run(argv, what, verdicts, preexec_fn=None):
    """(seconds, process) of a peer's run, or None after recording that it timed out."""
    try:
        return run(argv, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        verdicts.not_measured(what, "timed out after %d s" % TIMEOUT)
        return None


def outcome(p, frames):
    return "exit %d%s, %d recurse frames" % (
        p.returncode, " (%s)" % signal.Signals(-p.returncode).name if p.returncode < 0 else "",
        frames)


def pystack_core(pystack, interp, core, verdicts):
    """pystack core's time (or its cell's text when it has none)."""
    what = "%s: pystack core" % interp.id
    argv = [pystack, "core", core, interp.exe]
    got = peer_run(argv, what, verdicts)
    note = ""
    if got is not None and got[1].returncode == -signal.SIGSEGV:
        # pystack builds each frame's parent recursively and overflows the default stack on
        # deep stacks (bench/run.py); what it takes given room is still a measurement.
        got = peer_run(argv, what, verdicts, preexec_fn=bench_run.raise_stack_limit)
        note = " (crashes unless given a %d GiB stack)" % (bench_run.BIG_STACK_BYTES >> 30)
    if got is None:
        return "timeout"
    took, p = got
    frames = len(PYSTACK_RECURSE.findall(p.stdout))
    if p.returncode == 0 and frames == DEPTH:
        return "%.3f s%s" % (took, note)
    verdicts.not_measured(what, outcome(p, frames) + note, detail=p.stderr[-1000:])
    return "failed (%s)%s" % (outcome(p, frames), note)


# py-spy's cap on a stack's frames, and a program just under it.
PYSPY_MAX_FRAMES = 4096
UNDER_PYSPY_CAP = 4000
UNDER_CAP = """import sys, time
sys.setrecursionlimit(10000)
def recurse(n):
    if n > 1:
        return recurse(n - 1)
    sys.stdout.write("ready\\n"); sys.stdout.flush(); time.sleep(600)
recurse(%d)
""" % UNDER_PYSPY_CAP
ANY_RECURSE = re.compile(r"^\s*recurse \(", re.M)


def py_spy_dump(py_spy, interp, pid, verdicts):
    """py-spy dump's time on the live program (or its cell's text when it has none)."""
    what = "%s: py-spy dump --pid" % interp.id
    got = peer_run([py_spy, "dump", "--pid", str(pid)], what, verdicts)
    if got is None:
        return "timeout"
    took, p = got
    frames = len(PYSPY_RECURSE.findall(p.stdout))
    if p.returncode == 0 and frames == DEPTH:
        return took
    lines = (p.stdout + p.stderr).strip().splitlines()
    said = next((line for line in lines if line.startswith("Error")), lines[-1] if lines else "")
    # Its frame cap, or any other failure: the same interpreter just under the cap tells which.
    under = subprocess.Popen([interp.exe, "-c", UNDER_CAP], stdout=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
    try:
        under.stdout.readline()
        control = peer_run([py_spy, "dump", "--pid", str(under.pid)], what, verdicts)
    finally:
        under.kill()
        under.wait()
    if (control is not None and control[1].returncode == 0
            and len(ANY_RECURSE.findall(control[1].stdout)) == UNDER_PYSPY_CAP):
        verdicts.peer_limit(what, "%s (%s), where it dumps %s %d frames deep: it gives up past "
                                  "%d frames" % (outcome(p, frames), said, interp.id,
                                                 UNDER_PYSPY_CAP, PYSPY_MAX_FRAMES))
        return "fails (%r; %d frames deep works)" % (said, UNDER_PYSPY_CAP)
    verdicts.not_measured(what, "%s (%s), and %d frames deep too" % (
        outcome(p, frames), said, UNDER_PYSPY_CAP), detail=p.stderr[-1000:])
    return "failed (%s)" % outcome(p, frames)


def main():
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    import harness

    cache = os.environ.get("PYUNWIND_CACHE") or os.path.expanduser("~/.cache/pyunwind")
    peers = {"pystack": os.path.join(cache, "bench-venv", "bin", "pystack"),
             "py-spy": os.path.join(cache, "bench-venv", "bin", "py-spy")}
    for tool in [str(harness.cli_path()), LLDB] + list(peers.values()):
        if not os.access(tool, os.X_OK):
            print("huge_stack: %s is missing (make build; bench/setup.sh)" % tool)
            return 2
    results, verdicts = {}, Verdicts()
    with tempfile.TemporaryDirectory() as workdir:
        for interp in harness.pick(INTERPS):
            try:
                results[interp.id] = measure(harness, interp, workdir, peers, verdicts)
            except (Failure, harness.HarnessError, subprocess.TimeoutExpired) as e:
                verdicts.failed(interp.id, e, detail=e)
    ids = list(results)
    print("huge stack: one thread %d Python frames deep, best of %d (gdb bt: %d, in turns with "
          "the constant filter), every run checked" % (DEPTH, REPEAT, BT_REPEAT))
    print("| measure | " + " | ".join(ids) + " | target |")
    print("|---|" + "---|" * len(ids) + "---|")
    targets = {"CLI core text": "< %.1f s" % TARGET_CLI_S, "CLI core --json": "< %.1f s" % TARGET_CLI_S,
               "CLI pid --json": "< %.1f s" % TARGET_CLI_S, "gdb py-bt": "< %.1f s" % TARGET_GDB_PYBT_S,
               "gdb bt": "within %d%% of the constant filter" % round((TARGET_BT_OVER_FLOOR - 1) * 100),
               "lldb py-bt": "< %.1f s" % TARGET_LLDB_PYBT_S}
    names = next(iter(results.values())).keys() if results else []
    for name in names:
        cells = []
        for i in ids:
            v = results[i][name]
            cells.append(v if isinstance(v, str) else ("%.0f" % v if "MiB" in name else "%.3f s" % v))
        print("| %s | %s | %s |" % (name, " | ".join(cells), targets.get(name, "")))
    lines = []
    for i in ids:
        r = results[i]
        for name, limit in (("CLI core text", TARGET_CLI_S), ("CLI core --json", TARGET_CLI_S),
                            ("CLI pid --json", TARGET_CLI_S), ("gdb py-bt", TARGET_GDB_PYBT_S),
                            ("lldb py-bt", TARGET_LLDB_PYBT_S)):
            word = verdicts.under("%s %s" % (i, name), r[name], limit, "%.3f s")
            lines.append("%s %s: %.3f s (target < %.1f s): %s" % (i, name, r[name], limit, word))
        ratio = r["gdb bt"] / max(r["gdb bt, constant filter"], 1e-3)
        word = verdicts.at_most("%s gdb bt over a filter of constant frames" % i, ratio,
                                TARGET_BT_OVER_FLOOR, "%.2fx")
        lines.append("%s gdb bt: %.2fx a filter of constant frames (target <= %.2fx): %s; "
                     "%.1fx bt -no-filters, which prints the native frames only" % (
                         i, ratio, TARGET_BT_OVER_FLOOR, word,
                         r["gdb bt"] / max(r["gdb bt -no-filters"], 1e-3)))
        lines.append("%s lldb py-bt beyond printing as much text: %.3f s"
                     % (i, r["lldb py-bt"] - r["lldb, printing as much text"]))
    for line in lines:
        print(line)
    return verdicts.finish()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[3] == "program":
        program(int(sys.argv[4]))
    else:
        sys.exit(main())
