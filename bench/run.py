#!/usr/bin/env python3
"""Benchmark pyunwind's py-bt and CLI against libpython.py's py-bt and pystack, on core files.

For each depth N a Debian /usr/bin/python3.11 runs bench/deep.py N (N frames of `recurse`,
then a blocking read), is dumped with gcore and killed. Every tool then reads the same core:

  baseline   gdb -q -batch -nx python3.11 CORE          (start-up + loading the core)
  libpython  gdb ... -ex 'source python3.11-gdb.py' -ex py-bt
  ours-gdb   gdb ... -x gdb-scripts/pyunwind-gdb.py -ex py-bt
  pystack    pystack core CORE /usr/bin/python3.11      (from bench/setup.sh's venv)
  ours-cli   target/release/pyunwind core CORE          (and once with --json)
  pystack-native  pystack core CORE /usr/bin/python3.11 --native
  ours-native     target/release/pyunwind core CORE --native --json
  ours-bt         gdb ... -x gdb-scripts/pyunwind-gdb.py -ex bt     (the frame filter)
  ours-bt-real    the same after `set pyunwind-frames real` (one gdb frame per Python frame)

py-bt (libpython's and ours) is also timed inside gdb, from just before the command to just
after it (`bench-command-seconds`), and our script's load the same way. And py-bt is timed as
a user times it: the whole gdb run (`gdb ... -x SCRIPT -ex py-bt python3.11 CORE`) minus the
same run with `info threads` in place of py-bt, the script and the core loaded in both (for
libpython's, the run that sources python3.11-gdb.py). gdb's own start-up varies by about 0.1 s
from run to run, so those runs alternate, USER_RUNS times at the deepest depth, and each
command's fastest run is taken (noise only adds time). The targets (py-bt under 50 ms, at least
50x faster than libpython's) are on the user's figures, and on the in-gdb ones.

All gdb runs get the same `-iex` settings: debuginfod off, auto-loading of Python scripts off
(were python3.11-dbg installed, gdb would auto-load its python3.11-gdb.py into every run,
baseline included, where its py-bt would clash with ours), and the debug-file directory of
python3.11-dbg and libc6-dbg as tools/debuginfod-tree.sh unpacks them (bench/setup.sh; not
installed, so that the tests' gdb runs never see them): the debug info is found the same way in
every gdb run, as an installed python3.11-dbg's would be. Each time is the median of K runs; every
run's output is checked for exactly N `recurse` frames, so a failing command is never timed as
if it worked.

Exit status (bench/verdicts.py): 0 when every tool produced the expected frames and every
target at the deepest depth was measured and met; 1 when one of ours failed or timed out, a peer
(libpython.py, pystack) failed or timed out, or a target was missed or could not be computed,
each named on a `bench: FAILED|NOT MEASURED|MISSED: ...` line at the end; 2 for a usage or
set-up problem (missing tool or build). Stdlib only.
"""

import argparse
import json
import os
import re
import resource
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from verdicts import Verdicts

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
DEEP_PY = os.path.join(BENCH_DIR, "deep.py")
GDB_SCRIPT = os.path.join(REPO, "gdb-scripts", "pyunwind-gdb.py")
CLI = os.path.join(REPO, "target", "release", "pyunwind")


def _debug_tree():
    """Debian's python3.11-dbg and libc6-dbg for the installed versions, unpacked (not
    installed) by tools/debuginfod-tree.sh, which bench/setup.sh ran: its root, or "" when it
    cannot be had (libpython's runs are then reported missing)."""
    try:
        out = subprocess.run(["bash", os.path.join(REPO, "tools", "debuginfod-tree.sh")],
                             capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = out.stdout.split()
    return lines[-1] if out.returncode == 0 and lines else ""


DEBUG_TREE = os.environ.get("PYUNWIND_DEBUG_TREE") or _debug_tree()
# Where gdb finds /usr/bin/python3.11's debug file (by build-id), and libpython's gdb script.
DEBUG_DIR = os.path.join(DEBUG_TREE, "usr", "lib", "debug")
LIBPYTHON_GDB = os.path.join(DEBUG_TREE, "usr", "share", "gdb", "auto-load", "usr", "bin",
                             "python3.11-gdb.py")
PYTHON = "/usr/bin/python3.11"  # --python changes it
EXPECTED_VERSION = "3.11"  # PYTHON's major.minor: what our JSON must report
FUNC = "recurse"

DEPTHS = (100, 1000, 5000)
QUICK_DEPTHS = (1000,)
# py-bt's own time inside gdb (issue 27): gdb's start-up varies by +-100 ms from run to run
# (it indexes DWARF on several threads), more than the command takes, so the command is timed
# inside gdb, from just before it to just after it, for libpython's py-bt the same way.
TARGET_COMMAND_S = 0.05
TARGET_SPEEDUP = 50.0
# Runs of each whole-gdb command for py-bt's time as a user sees it (see the docstring),
# alternating, at the deepest depth; the fastest of each is taken.
USER_RUNS = 9
READY_TIMEOUT_S = 60.0
STDERR_TAIL_LINES = 15
# pystack 1.7.2 builds each frame's parent recursively (FrameObject's constructor), about ten
# C++ frames per Python frame, and overflows the default 8 MiB stack between 3000 and 5000
# Python frames (SIGSEGV). A tool that crashes that way is noted, then timed again with this
# stack limit, so the table still compares working commands.
BIG_STACK_BYTES = 1 << 30
# Below this a "time beyond start-up" is noise; ratios use it as the floor.
MIN_MEASURABLE_S = 0.001

TOOLS = ("baseline", "libpython", "ours-gdb", "pystack", "ours-cli", "pystack-native",
         "ours-native", "ours-bt", "ours-bt-real")
OURS = ("ours-gdb", "ours-cli", "ours-native", "ours-bt", "ours-bt-real")
PEERS = ("libpython", "pystack", "pystack-native")
# `core --native --json` against `pystack core --native` (issue 12).
TARGET_NATIVE_SPEEDUP = 5.0

GDB_COMMON = [
    "gdb", "-q", "-batch", "-nx",
    "-iex", "set debuginfod enabled off",
    "-iex", "set auto-load python-scripts off",
    "-iex", f"set debug-file-directory {DEBUG_DIR}",
]

# libpython / our gdb py-bt:  '  File "/x/deep.py", line 16, in recurse'
TRACEBACK_FRAME = re.compile(r'^\s*File "[^"]*", line \d+, in ' + FUNC + r"\s*$")
# gdb's bt through our frame filter: '#7  recurse () at /x/deep.py:16' (default mode numbers
# only the first Python frame of an eval-loop frame; real frames number each).
BT_FRAME = re.compile(r"^(?:#\d+\s+)?" + FUNC + r" \(")
BT_NUMBERED_FRAME = re.compile(r"^#\d+\s+" + FUNC + r" \(")
# pystack:  '    (Python) File "/x/deep.py", line 16, in recurse'
PYSTACK_FRAME = re.compile(r'^\s*\(Python\) File "[^"]*", line \d+, in ' + FUNC + r"\s*$")
# our CLI text: the function named on a frame line, whatever the exact format; a printed
# source line ("return recurse(n - 1)") is a call, not a frame, and is not counted.
CLI_FRAME = re.compile(r"(?<![\w.])" + FUNC + r"(?![\w(])")


class Failure(Exception):
    """A tool ran but did not produce what it must; message says why."""


class Timeout(Exception):
    pass


def tail(text, lines=STDERR_TAIL_LINES):
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join("    | " + line for line in kept) if kept else "    | (empty)"


def child_env():
    env = dict(os.environ)
    env.pop("DEBUGINFOD_URLS", None)  # identical, offline debug-info lookup for every run
    return env


def raise_stack_limit():
    """preexec_fn: give the child a BIG_STACK_BYTES stack (or the hard limit if lower)."""
    _, hard = resource.getrlimit(resource.RLIMIT_STACK)
    soft = BIG_STACK_BYTES if hard == resource.RLIM_INFINITY else min(BIG_STACK_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_STACK, (soft, hard))


def run_timed(argv, timeout, big_stack=False):
    """Run argv; return (seconds, returncode, stdout, stderr). Raises Timeout."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=child_env(), start_new_session=True, cwd=REPO,
        preexec_fn=raise_stack_limit if big_stack else None,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise Timeout(f"no answer after {timeout:.0f} s")
    elapsed = time.perf_counter() - start
    return (elapsed, proc.returncode,
            out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


# ---- output checks: each returns the frame count or raises Failure -------------------------

def count_lines(pattern, text):
    return sum(1 for line in text.splitlines() if pattern.search(line))


def check_baseline(out, err, depth):
    if "Core was generated by" not in out + err:
        raise Failure("gdb did not load the core (no 'Core was generated by' line)")
    return None


# Printed by the gdb runs around the timed command (see timed_gdb_command).
COMMAND_TIME = re.compile(r"^bench-command-seconds ([0-9.]+)$", re.M)
SCRIPT_TIME = re.compile(r"^bench-script-seconds ([0-9.]+)$", re.M)


def timed_gdb_command(command, script=None):
    """gdb arguments that run `command` timed inside gdb, after loading `script` (timed too:
    what loading the plugin adds to gdb's start-up, once per session)."""
    clock = "python import time as _bench_t; _bench_t0 = _bench_t.perf_counter()"
    out = []
    if script:
        out += ["-ex", clock, "-ex", script,
                "-ex", "python print('bench-script-seconds %.6f' % (_bench_t.perf_counter() - _bench_t0))"]
    return out + ["-ex", clock, "-ex", command,
                  "-ex", "python print('bench-command-seconds %.6f' % (_bench_t.perf_counter() - _bench_t0))"]


def check_traceback(out, err, depth):
    if "Traceback (most recent call first):" not in out:
        raise Failure("no 'Traceback (most recent call first):' line in the output")
    return count_lines(TRACEBACK_FRAME, out)


def check_bt(out, err, depth):
    return count_lines(BT_FRAME, out)


def check_bt_real(out, err, depth):
    return count_lines(BT_NUMBERED_FRAME, out)


def check_pystack(out, err, depth):
    return count_lines(PYSTACK_FRAME, out)


def check_cli_text(out, err, depth):
    return count_lines(CLI_FRAME, out)


def check_cli_json(out, err, depth):
    try:
        report = json.loads(out)
    except ValueError as exc:
        raise Failure(f"output is not one JSON object: {exc}")
    version = str((report.get("python") or {}).get("version", ""))
    if not version.startswith(EXPECTED_VERSION):
        raise Failure(f"python.version is {version!r}, expected {EXPECTED_VERSION}.x")
    count = 0
    for thread in report.get("threads") or []:
        for frame in thread.get("frames") or []:
            if frame.get("kind") == "python" and frame.get("function") == FUNC:
                count += 1
    return count


class Tool:
    def __init__(self, name, label, argv_for, check, fatal_timeout, retry_big_stack=False):
        self.retry_big_stack = retry_big_stack
        self.name = name
        self.label = label
        self.argv_for = argv_for
        self.check = check
        self.fatal_timeout = fatal_timeout


def make_tools(pystack):
    return {
        "baseline": Tool(
            "baseline", "gdb start-up (baseline)",
            lambda core: GDB_COMMON + [PYTHON, core], check_baseline, True),
        "libpython": Tool(
            "libpython", "libpython.py py-bt",
            lambda core: GDB_COMMON + timed_gdb_command("py-bt", f"source {LIBPYTHON_GDB}")
            + [PYTHON, core],
            check_traceback, False),
        "ours-gdb": Tool(
            "ours-gdb", "ours py-bt (gdb)",
            lambda core: GDB_COMMON + timed_gdb_command("py-bt", f"source {GDB_SCRIPT}")
            + [PYTHON, core],
            check_traceback, True),
        "pystack": Tool(
            "pystack", "pystack core",
            lambda core: [pystack, "core", core, PYTHON], check_pystack, False,
            retry_big_stack=True),
        "ours-cli": Tool(
            "ours-cli", "ours CLI (text)",
            lambda core: [CLI, "core", core], check_cli_text, True),
        "pystack-native": Tool(
            "pystack-native", "pystack core --native",
            lambda core: [pystack, "core", core, PYTHON, "--native"], check_pystack, False,
            retry_big_stack=True),
        "ours-native": Tool(
            "ours-native", "ours CLI --native --json",
            lambda core: [CLI, "core", core, "--native", "--json"], check_cli_json, True),
        "ours-bt": Tool(
            "ours-bt", "ours bt (gdb, frame filter)",
            lambda core: GDB_COMMON + ["-x", GDB_SCRIPT, "-ex", "bt", PYTHON, core],
            check_bt, True),
        "ours-bt-real": Tool(
            "ours-bt-real", "ours bt (gdb, real frames)",
            lambda core: GDB_COMMON + ["-x", GDB_SCRIPT, "-ex", "set pyunwind-frames real", "-ex", "bt",
                                       PYTHON, core],
            check_bt_real, True),
        "ours-cli-json": Tool(
            "ours-cli-json", "ours CLI --json (1 run)",
            lambda core: [CLI, "core", core, "--json"], check_cli_json, True),
    }


class Result:
    """Outcome of one tool at one depth: median seconds, or a timeout, or a failure."""

    def __init__(self):
        self.times = []
        self.command_times = []  # timed inside gdb (timed_gdb_command)
        self.script_times = []
        self.frames = None
        self.timeout = None
        self.failure = None
        self.crash_note = None  # crashed with the default stack, timed with a big one

    @property
    def median(self):
        return statistics.median(self.times) if self.times and not self.failure else None

    @property
    def command_median(self):
        ok = self.command_times and not self.failure and not self.timeout
        return statistics.median(self.command_times) if ok else None

    @property
    def script_median(self):
        ok = self.script_times and not self.failure and not self.timeout
        return statistics.median(self.script_times) if ok else None


def measure(tool, core, depth, repeat, timeout):
    result = Result()
    big_stack = False
    runs = 0
    while runs < repeat:
        argv = tool.argv_for(core)
        try:
            elapsed, rc, out, err = run_timed(argv, timeout, big_stack)
        except Timeout as exc:
            result.timeout = timeout
            if tool.fatal_timeout:
                result.failure = f"{exc}\n    command: {shlex.join(argv)}"
            return result
        if rc == -signal.SIGSEGV and tool.retry_big_stack and not big_stack:
            soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
            limit = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft >> 20} MiB"
            result.crash_note = (
                f"crashed (SIGSEGV) with the default stack limit ({limit}); "
                f"timed again with a {BIG_STACK_BYTES >> 20} MiB stack")
            big_stack = True
            continue
        runs += 1
        try:
            if rc != 0:
                raise Failure(f"exit status {rc}" + (
                    f" ({signal.Signals(-rc).name})" if rc < 0 else "")
                    + (f"; first {result.crash_note}" if result.crash_note else ""))
            frames = tool.check(out, err, depth)
            if frames is not None and frames != depth:
                raise Failure(f"{frames} frames of {FUNC}() in the output, expected {depth}")
        except Failure as exc:
            result.failure = (f"{exc}\n    command: {shlex.join(argv)}\n"
                              f"    stderr tail:\n{tail(err)}\n"
                              f"    stdout tail:\n{tail(out, 5)}")
            return result
        result.frames = frames
        result.times.append(elapsed)
        for pattern, times in ((COMMAND_TIME, result.command_times),
                               (SCRIPT_TIME, result.script_times)):
            m = pattern.search(out)
            if m:
                times.append(float(m.group(1)))
    return result


class UserTimed:
    """py-bt's time as a user sees it: whole gdb runs, py-bt's minus `info threads`' with the
    same script and core loaded, the fastest of alternating runs of each."""

    def __init__(self):
        self.ours = None  # seconds, fastest whole run of ours: py-bt
        self.ours_base = None  # ... of ours: info threads
        self.lib_base = None  # ... of libpython's script: info threads
        self.failure = None

    @property
    def ours_extra(self):
        if self.failure or self.ours is None or self.ours_base is None:
            return None
        return max(self.ours - self.ours_base, 0.0)

    def lib_extra(self, lib):
        """libpython's py-bt beyond its `info threads` run (its fastest whole run; a timeout
        is a lower bound): (seconds, is a lower bound)."""
        if self.failure or self.lib_base is None or lib is None or lib.failure:
            return None, False
        if lib.timeout:
            return lib.timeout - self.lib_base, True
        return max(min(lib.times) - self.lib_base, 0.0), False


def check_info_threads(out, err, depth):
    check_baseline(out, err, depth)
    if not re.search(r"^\*?\s*1\s+Thread ", out, re.M):
        raise Failure("no thread listed by `info threads`")
    return None


def measure_user(core, depth, runs, timeout, with_lib):
    """UserTimed for this core: `runs` rounds of (ours info threads, ours py-bt[, libpython's
    info threads]), each output checked."""
    commands = [
        ("ours_base", GDB_COMMON + ["-x", GDB_SCRIPT, "-ex", "info threads", PYTHON, core],
         check_info_threads),
        ("ours", GDB_COMMON + ["-x", GDB_SCRIPT, "-ex", "py-bt", PYTHON, core], check_traceback),
    ]
    if with_lib:
        commands.append(("lib_base", GDB_COMMON + ["-ex", f"source {LIBPYTHON_GDB}", "-ex",
                                                   "info threads", PYTHON, core],
                         check_info_threads))
    result = UserTimed()
    for _ in range(runs):
        for attr, argv, check in commands:
            try:
                elapsed, rc, out, err = run_timed(argv, timeout)
                if rc != 0:
                    raise Failure(f"exit status {rc}")
                frames = check(out, err, depth)
                if frames is not None and frames != depth:
                    raise Failure(f"{frames} frames of {FUNC}() in the output, expected {depth}")
            except (Failure, Timeout) as exc:
                result.failure = (f"{exc}\n    command: {shlex.join(argv)}")
                return result
            best = getattr(result, attr)
            setattr(result, attr, elapsed if best is None else min(best, elapsed))
    return result


# ---- cores --------------------------------------------------------------------------------

def make_core(depth, directory):
    """Run deep.py DEPTH, gcore it once it is ready, kill it; return the core's path."""
    child = subprocess.Popen(
        [PYTHON, DEEP_PY, str(depth)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=child_env(), start_new_session=True,
    )
    try:
        ready, _, _ = select.select([child.stdout], [], [], READY_TIMEOUT_S)
        line = child.stdout.readline().decode() if ready else ""
        if not line.startswith("ready"):
            child.kill()
            _, err = child.communicate()
            raise SystemExit(
                f"bench: deep.py {depth} did not get ready (got {line!r}); stderr:\n"
                f"{tail(err.decode('utf-8', 'replace'))}")
        prefix = os.path.join(directory, f"core-{depth}")
        gcore = subprocess.run(
            ["gcore", "-o", prefix, str(child.pid)], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), timeout=600,
        )
        core = f"{prefix}.{child.pid}"
        if gcore.returncode != 0 or not os.path.isfile(core):
            raise SystemExit(
                f"bench: gcore failed for deep.py {depth} (status {gcore.returncode}):\n"
                f"{tail(gcore.stderr.decode('utf-8', 'replace'))}")
        return core
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


# ---- set-up checks ------------------------------------------------------------------------

def version_of(argv):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=60, env=child_env())
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else "?"


def check_setup(selected, pystack):
    problems = []
    if not os.access(PYTHON, os.X_OK):
        problems.append(f"{PYTHON} is missing")
    for prog in ("gdb", "gcore"):
        if shutil.which(prog) is None:
            problems.append(f"{prog} is not on PATH")
    if "libpython" in selected and not os.path.isfile(LIBPYTHON_GDB):
        problems.append(f"{LIBPYTHON_GDB} is missing (python3.11-dbg not unpacked: bench/setup.sh)")
    if {"pystack", "pystack-native"} & set(selected) and not os.access(pystack, os.X_OK):
        problems.append(f"pystack not found at {pystack}")
    if "ours-gdb" in selected and not os.path.isfile(GDB_SCRIPT):
        problems.append(f"ours: not built ({os.path.relpath(GDB_SCRIPT, REPO)} is missing)")
    if "ours-cli" in selected and not os.access(CLI, os.X_OK):
        problems.append(f"ours: not built ({os.path.relpath(CLI, REPO)} is missing; "
                        "cargo build --release)")
    if problems:
        print("bench: cannot run (bench/setup.sh installs gdb, python3.11-dbg's files and pystack;"
              " --only skips tools):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        raise SystemExit(2)


def use_python(path):
    """Measure on cores of `path` (deep.py run by it, read against it) instead of Debian's 3.11."""
    global PYTHON, EXPECTED_VERSION
    PYTHON = path
    m = re.search(r"Python (\d+\.\d+)", version_of([path, "--version"]))
    if not m:
        raise SystemExit(f"bench: {path} --version does not say a Python version")
    EXPECTED_VERSION = m.group(1)


# ---- report -------------------------------------------------------------------------------

def fmt_time(result):
    if result is None:
        return "-"
    if result.failure:
        return "FAILED"
    if result.timeout:
        return f">{result.timeout:.0f} (timeout)"
    return f"{result.median:.3f}" + (" (*)" if result.crash_note else "")


def beyond(result, base):
    """Median seconds beyond gdb start-up, or None."""
    if result is None or base is None or result.median is None or base.median is None:
        return None
    return result.median - base.median


def fmt_seconds(value):
    if value is None:
        return "-"
    if value < MIN_MEASURABLE_S:
        return f"<{MIN_MEASURABLE_S:.3f}"
    return f"{value:.3f}"


def ratio(slow, fast, slow_is_lower_bound=False):
    """slow/fast as text; fast is floored at MIN_MEASURABLE_S (then the ratio is a bound)."""
    if slow is None or fast is None:
        return "-"
    bound = slow_is_lower_bound
    if fast < MIN_MEASURABLE_S:
        fast, bound = MIN_MEASURABLE_S, True
    value = slow / fast
    return f"{'>' if bound else ''}{value:.1f}x"


def lib_seconds(results, key, base=None):
    """libpython's time (total or beyond start-up), and whether it is only a lower bound."""
    lib = results.get("libpython")
    if lib is None or lib.failure:
        return None, False
    if lib.timeout:
        value = lib.timeout
        bound = True
    else:
        value = lib.median
        bound = False
    if base is not None:
        if base.median is None:
            return None, False
        value -= base.median
    return value, bound


def lib_over_ours_command(res):
    """(libpython's py-bt time inside gdb, ours, whether libpython's is a lower bound)."""
    lib, ours = res.get("libpython"), res.get("ours-gdb")
    fast = ours.command_median if ours is not None else None
    if lib is None or lib.failure:
        return None, fast, False
    if lib.timeout:
        return lib.timeout, fast, True
    return lib.command_median, fast, False


def print_table(depths, all_results, core_sizes):
    rows = []

    def row(label, fn):
        rows.append([label] + [fn(all_results[d], d) for d in depths])

    def get(name):
        return lambda res, d: fmt_time(res.get(name)) if name in res else "-"

    row("core size (MB)", lambda res, d: f"{core_sizes[d] / 1e6:.1f}")
    row("gdb start-up (baseline)", get("baseline"))
    row("libpython.py py-bt", get("libpython"))
    row("ours py-bt (gdb)", get("ours-gdb"))
    row("pystack core", get("pystack"))
    row("ours CLI (text)", get("ours-cli"))
    row("ours CLI --json (1 run)", get("ours-cli-json"))
    def lib_beyond(res, d):
        value, bound = lib_seconds(res, "libpython", res.get("baseline"))
        return (">" if bound and value is not None else "") + fmt_seconds(value)

    # Whole runs minus the baseline's: gdb's start-up varies more than our py-bt takes, so
    # ours is timed inside gdb below (and these rows are for libpython, whose time dwarfs it).
    row("libpython beyond start-up", lib_beyond)

    def lib_over_ours(res, d, use_beyond):
        base = res.get("baseline") if use_beyond else None
        slow, bound = lib_seconds(res, "libpython", base)
        ours = res.get("ours-gdb")
        if ours is None or ours.median is None:
            return "-"
        fast = beyond(ours, base) if use_beyond else ours.median
        return ratio(slow, fast, bound)

    row("libpython/ours, total", lambda res, d: lib_over_ours(res, d, False))

    def command(name):
        def cell(res, d):
            r = res.get(name)
            if r is not None and r.timeout and not r.failure:
                return f">{r.timeout:.0f} (timeout)"
            return fmt_seconds(r.command_median if r is not None else None)
        return cell

    row("libpython py-bt, in gdb", command("libpython"))
    row("ours py-bt, in gdb", command("ours-gdb"))
    row("ours script load, in gdb", lambda res, d: fmt_seconds(
        res["ours-gdb"].script_median if "ours-gdb" in res else None))
    row("libpython/ours, in gdb", lambda res, d: ratio(*lib_over_ours_command(res)))

    def pystack_over(theirs, ours_key):
        """pystack's median over ours (a pystack timeout is a lower bound)."""
        def cell(res, d):
            ps, ours = res.get(theirs), res.get(ours_key)
            if ps is None or ours is None or ours.median is None:
                return "-"
            if ps.timeout and not ps.failure:
                return ratio(ps.timeout, ours.median, True)
            return ratio(ps.median, ours.median)
        return cell

    row("pystack/ours CLI", pystack_over("pystack", "ours-cli"))
    row("pystack core --native", get("pystack-native"))
    row("ours CLI --native --json", get("ours-native"))
    row("pystack/ours, --native", pystack_over("pystack-native", "ours-native"))
    row("ours bt (gdb, frame filter)", get("ours-bt"))
    row("ours bt (gdb, real frames)", get("ours-bt-real"))

    def real_over_default(res, d, use_beyond):
        """What real frames cost on bt: real mode's time over default mode's."""
        base = res.get("baseline") if use_beyond else None
        real, default = res.get("ours-bt-real"), res.get("ours-bt")
        if real is None or default is None or real.median is None or default.median is None:
            return "-"
        if use_beyond:
            return ratio(beyond(real, base), beyond(default, base))
        return ratio(real.median, default.median)

    row("bt real/default, beyond start-up", lambda res, d: real_over_default(res, d, True))
    row("bt real/default, total", lambda res, d: real_over_default(res, d, False))

    header = ["seconds, median of runs"] + [f"N={d}" for d in depths]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = lambda cells: "  ".join(
        c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells))
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def print_verdict(depths, all_results, verdicts):
    depth = max(depths)
    res = all_results[depth]
    where = f"at depth {depth} on {PYTHON}"
    if "pystack-native" in res and "ours-native" in res:
        ps, ours_native = res["pystack-native"], res["ours-native"]
        speedup = None
        if ps.median is not None and ours_native.median is not None:
            speedup = ps.median / max(ours_native.median, MIN_MEASURABLE_S)
        word = verdicts.at_least(
            f"core --native --json vs pystack core --native {where}", speedup,
            TARGET_NATIVE_SPEEDUP, "%.1fx",
            why_not=not_measured_because(res, (("pystack-native", "median"),
                                               ("ours-native", "median"))))
        print(f"core --native --json vs pystack core --native {where}: "
              + ("-" if speedup is None else f"{speedup:.1f}x")
              + f" (target >= {TARGET_NATIVE_SPEEDUP:.0f}x): {word}")
    if "ours-gdb" not in res:
        return  # --only left py-bt out: nothing to say about it
    ours, base = res.get("ours-gdb"), res.get("baseline")
    extra = ours.command_median
    word = verdicts.under(f"py-bt in gdb, beyond its start-up, {where}", extra,
                          TARGET_COMMAND_S, "%.3f s",
                          why_not=not_measured_because(res, (("ours-gdb", "command_median"),)))
    print(f"py-bt {where}: " + ("-" if extra is None else f"{fmt_seconds(extra)} s")
          + " in gdb, beyond its start-up "
          f"(target < {TARGET_COMMAND_S} s): {word}; the script's load "
          f"{fmt_seconds(ours.script_median)} s once; whole runs' medians differ by "
          f"{fmt_seconds(beyond(ours, base))} s")
    user = res.get("user")
    if user is not None:
        extra = user.ours_extra
        word = verdicts.under(f"py-bt as a user times it, {where}", extra, TARGET_COMMAND_S,
                              "%.3f s", why_not=user.failure and "a gdb run failed")
        print(f"py-bt as a user times it {where}: "
              + ("-" if extra is None else f"{fmt_seconds(extra)} s")
              + f" (whole gdb runs, py-bt's minus `info threads`', fastest of {USER_RUNS}; "
              f"target < {TARGET_COMMAND_S} s): {word}")
        if user.failure:
            print(f"    {user.failure}")
        if "libpython" in res:
            slow, bound = user.lib_extra(res["libpython"])
            speedup = None if slow is None or extra is None else slow / max(
                extra, MIN_MEASURABLE_S)
            word = verdicts.at_least(
                f"py-bt as a user times it vs libpython.py's {where}", speedup, TARGET_SPEEDUP,
                "%.1fx", why_not=None if speedup is not None else "a gdb run failed",
                lower_bound="libpython.py timed out" if bound else None)
            print("speed-up vs libpython.py as a user times it: "
                  + ("-" if speedup is None else f"{'>' if bound else ''}{speedup:.1f}x")
                  + f" ({fmt_seconds(slow)} s against {fmt_seconds(extra)} s) "
                  f"(target >= {TARGET_SPEEDUP:.0f}x): {word}")
    if "libpython" not in res:
        return  # not run on this interpreter (--python): no speed-up to state
    slow, fast, bound = lib_over_ours_command(res)
    speedup = None if slow is None or fast is None else slow / max(fast, MIN_MEASURABLE_S)
    word = verdicts.at_least(
        f"py-bt in gdb vs libpython.py's {where}", speedup, TARGET_SPEEDUP, "%.1fx",
        why_not=not_measured_because(res, (("ours-gdb", "command_median"),
                                           ("libpython", "command_median"))),
        lower_bound=f"libpython.py timed out after {res['libpython'].timeout:.0f} s"
        if bound else None)
    bound = bound or (fast is not None and fast < MIN_MEASURABLE_S)
    total_slow, total_bound = lib_seconds(res, "libpython")
    total = ratio(total_slow, ours.median, total_bound)
    print("speed-up vs libpython.py: "
          + ("-" if speedup is None else f"{'>' if bound else ''}{speedup:.1f}x")
          + f" on py-bt in gdb {where} ({total} on total time) "
          f"(target >= {TARGET_SPEEDUP:.0f}x): {word}")


def not_measured_because(res, needs):
    """Why a target over these (tool, Result property) times has no value: the first without
    one."""
    for name, prop in needs:
        r = res.get(name)
        if r is None:
            return f"{name} not run"
        if r.failure:
            return f"{name} failed"
        if getattr(r, prop) is None:
            if r.timeout:
                return f"{name} timed out after {r.timeout:.0f} s"
            if prop == "command_median":
                return f"{name}: no bench-command-seconds line in gdb's output"
            return f"{name}: no time"
    return None


# ---- main ---------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: N=1000 only, one run per tool")
    parser.add_argument("--repeat", type=int, default=None, metavar="K",
                        help="runs per measurement, median reported (default 3, --quick 1)")
    parser.add_argument("--depths", default=None, metavar="N,N,...",
                        help="stack depths (default 100,1000,5000; --quick 1000)")
    parser.add_argument("--only", default=None, metavar="TOOL,...",
                        help="run only these of: " + ",".join(TOOLS)
                        + " (the gdb start-up baseline always runs)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="per-command time limit in seconds (default 600)")
    parser.add_argument("--python", default=None, metavar="PATH",
                        help="the interpreter that runs deep.py (default %s; libpython's py-bt "
                        "is Debian 3.11's, so it runs only on the default)" % PYTHON)
    parser.add_argument("--keep-cores", action="store_true",
                        help="keep the core directory and print its path")
    args = parser.parse_args(argv)

    if args.depths:
        try:
            args.depths = tuple(int(x) for x in args.depths.split(",") if x.strip())
        except ValueError:
            parser.error("--depths takes integers separated by commas")
        if not args.depths or min(args.depths) < 1:
            parser.error("--depths must be positive")
    else:
        args.depths = QUICK_DEPTHS if args.quick else DEPTHS
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    if args.only:
        selected = [t.strip() for t in args.only.split(",") if t.strip()]
        unknown = [t for t in selected if t not in TOOLS]
        if unknown:
            parser.error(f"unknown tool(s) {', '.join(unknown)}; choose from {', '.join(TOOLS)}")
        args.selected = ["baseline"] + [t for t in TOOLS if t in selected and t != "baseline"]
    else:
        args.selected = list(TOOLS)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.python:
        use_python(args.python)
        if "libpython" in args.selected:
            args.selected.remove("libpython")
    cache = os.environ.get("PYUNWIND_CACHE") or os.path.expanduser("~/.cache/pyunwind")
    pystack = os.path.join(cache, "bench-venv", "bin", "pystack")
    check_setup(args.selected, pystack)
    tools = make_tools(pystack)
    order = list(args.selected)
    if "ours-cli" in order:
        order.insert(order.index("ours-cli") + 1, "ours-cli-json")

    print(f"bench: {version_of(['gdb', '--version'])}; {version_of([PYTHON, '--version'])}"
          + (f"; pystack {version_of([pystack, '--version'])}" if "pystack" in order else "")
          + f"; {args.repeat} run(s) each, median; timeout {args.timeout:.0f} s", flush=True)
    skipped = [t for t in TOOLS if t not in args.selected]
    if skipped:
        print(f"bench: not run (--only): {', '.join(skipped)}", flush=True)

    os.makedirs(cache, exist_ok=True)
    core_dir = tempfile.mkdtemp(prefix="bench-cores-", dir=cache)
    all_results, core_sizes, notes = {}, {}, []
    verdicts = Verdicts()
    try:
        warmed = False
        for depth in args.depths:
            core = make_core(depth, core_dir)
            core_sizes[depth] = os.path.getsize(core)
            if not warmed:
                # Untimed: brings gdb, the debug info and the tools into the page cache.
                for name in ("baseline", "pystack", "ours-cli", "ours-native"):
                    if name in order:
                        try:
                            run_timed(tools[name].argv_for(core), args.timeout)
                        except Timeout:
                            pass
                warmed = True
            results = {}
            for name in order:
                tool = tools[name]
                repeat = 1 if name == "ours-cli-json" else args.repeat
                print(f"bench: N={depth} {tool.label} ...", file=sys.stderr, flush=True)
                result = measure(tool, core, depth, repeat, args.timeout)
                results[name] = result
                if result.crash_note:
                    notes.append(f"(*) {tool.label}, N={depth}: {result.crash_note}")
                what = f"{tool.label} at depth {depth} on {PYTHON}"
                if result.failure:
                    # Ours failing is a defect; a peer failing leaves its cells (and any
                    # ratio over it) without a value: both are problems of the run.
                    record = verdicts.not_measured if name in PEERS else verdicts.failed
                    record(what, result.failure, detail=result.failure)
                elif result.timeout:
                    verdicts.not_measured(what, f"timed out after {result.timeout:.0f} s "
                                                "(shown as a lower bound)")
            if depth == max(args.depths) and "ours-gdb" in order:
                print(f"bench: N={depth} py-bt as a user times it ({USER_RUNS} rounds) ...",
                      file=sys.stderr, flush=True)
                results["user"] = measure_user(core, depth, 1 if args.quick else USER_RUNS,
                                               args.timeout, "libpython" in order)
                if results["user"].failure:
                    verdicts.failed(f"py-bt as a user times it at depth {depth}",
                                    results["user"].failure, detail=results["user"].failure)
            all_results[depth] = results
    finally:
        if args.keep_cores:
            print(f"bench: cores kept in {core_dir}")
        else:
            shutil.rmtree(core_dir, ignore_errors=True)

    print()
    print_table(args.depths, all_results, core_sizes)
    print()
    print_verdict(args.depths, all_results, verdicts)
    for note in notes:
        print(f"note: {note}")
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
