#!/usr/bin/env python3
"""Benchmark py-bt on cores of CPython 3.11, 3.14 and 3.15: pyunwind next to libpython.py and
pystack, one row per interpreter.

Interpreters: Debian's /usr/bin/python3.11, and Debian sid's stripped python3.14 and python3.15
(JIT compiled in, left off) from $PYUNWIND_CACHE/pythons/debian-sid (`make pythons`). Each runs
bench/deep.py N (N frames of `recurse`, then a blocking read), is dumped with gcore and killed.
Every tool then reads the same core:

  baseline   gdb -q -batch -nx PYTHON CORE                  (start-up + loading the core)
  ours py-bt gdb ... -x gdb-scripts/pyunwind-gdb.py -ex py-bt
  libpython  gdb ... -ex 'source python3.X-gdb.py' -ex py-bt (CPython's own, from the -dbg
             package: /usr/share/gdb/auto-load for 3.11, inside the sid root for 3.14/3.15)
  pystack    pystack core CORE PYTHON                       (bench/setup.sh's venv)
  CLI        target/release/pyunwind core CORE

All gdb runs get bench/run.py's `-iex` settings (debuginfod off, Python auto-load off) plus the
interpreter's debug-file-directory (python3.11-dbg's files unpacked by bench/setup.sh, or the
sid root's usr/lib/debug, where the detached DWARF libpython.py needs lives), the same for every gdb run on that core. Each time is
the median of K runs; every run's output is checked for exactly N `recurse` frames, so a
failing command is never timed as if it worked: it is shown as `failed` and what it printed is
shown below the table. libpython.py reads each Python frame from the `frame` argument of the
eval loop (_PyEval_EvalFrameDefault); on a build where gdb shows that argument optimized out
on the core, it cannot, and its failure is listed as a limit of the peer.

Exit status (bench/verdicts.py): 0 when every tool produced the expected frames on every core;
1 when one of ours (or the gdb start-up they are measured against) failed or timed out, or a
peer (libpython.py, pystack) is missing, failed or timed out, each named on a
`bench: FAILED|NOT MEASURED: ...` line at the end; 2 for a set-up problem (missing
interpreter, gdb or build). Stdlib only; the measuring code is bench/run.py's.
"""

import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile

import run  # bench/run.py, next to this file
from verdicts import Verdicts

sys.path.insert(0, os.path.join(run.REPO, "tests", "integration"))
import harness  # noqa: E402

DEPTH = 1000
REPEAT = 3
CACHE = os.environ.get("PYUNWIND_CACHE") or os.path.expanduser("~/.cache/pyunwind")
SID = os.path.join(CACHE, "pythons", "debian-sid")
PYSTACK = os.path.join(CACHE, "bench-venv", "bin", "pystack")

OURS = ("baseline", "ours-gdb", "ours-cli")
# What libpython.py's py-bt prints for an eval-loop frame whose `frame` it cannot read, and how
# gdb's bt shows why.
LIBPYTHON_NO_FRAME = "(unable to read python frame information)"
EVAL_FRAME_OPTIMIZED_OUT = re.compile(
    r"\b_PyEval_EvalFrameDefault \([^\n]*\bframe=<optimized out>")
ORDER = ("baseline", "ours-gdb", "libpython", "pystack", "ours-cli")


class Interpreter:
    """One row: the executable, where gdb finds its debug info and its libpython.py."""

    def __init__(self, name, exe, debug_dir, libpython_gdb):
        self.name = name
        self.exe = exe
        self.debug_dir = debug_dir
        self.libpython_gdb = libpython_gdb


def sid_libpython_gdb(minor):
    """The python3.MINOR-gdb.py of sid's python3.MINOR-dbg in the sid root, or None."""
    wanted = f"python3.{minor}-gdb.py"
    for directory, _, files in os.walk(os.path.join(SID, "usr", "share", "gdb")):
        if wanted in files:
            return os.path.join(directory, wanted)
    return None


def interpreters():
    sid_debug = os.path.join(SID, "usr", "lib", "debug")
    return [Interpreter("debian-3.11", run.PYTHON, run.DEBUG_DIR, run.LIBPYTHON_GDB)] + [
        Interpreter(f"sid-3.{minor}", os.path.join(SID, "usr", "bin", f"python3.{minor}"),
                    sid_debug, sid_libpython_gdb(minor))
        for minor in (14, 15)
    ]


def gdb_argv(interp):
    return run.GDB_COMMON + ["-iex", f"set debug-file-directory {interp.debug_dir}"]


def eval_frame_optimized_out(interp, core):
    """Whether gdb's bt on the core shows the eval loop's `frame` argument optimized out."""
    try:
        _, _, out, _ = run.run_timed(gdb_argv(interp) + ["-ex", "bt", interp.exe, core], 600)
    except run.Timeout:
        return False
    return EVAL_FRAME_OPTIMIZED_OUT.search(out) is not None


def make_tools(interp):
    gdb = gdb_argv(interp)
    exe = interp.exe
    tools = {
        "baseline": run.Tool(
            "baseline", "gdb start-up", lambda core: gdb + [exe, core],
            run.check_baseline, True),
        "ours-gdb": run.Tool(
            "ours-gdb", "ours py-bt",
            lambda core: gdb + ["-x", run.GDB_SCRIPT, "-ex", "py-bt", exe, core],
            run.check_traceback, True),
        "ours-cli": run.Tool(
            "ours-cli", "ours CLI", lambda core: [run.CLI, "core", core],
            run.check_cli_text, True),
    }
    if interp.libpython_gdb:
        tools["libpython"] = run.Tool(
            "libpython", "libpython.py py-bt",
            lambda core: gdb + ["-ex", f"source {interp.libpython_gdb}", "-ex", "py-bt",
                                exe, core],
            run.check_traceback, False)
    if os.access(PYSTACK, os.X_OK):
        tools["pystack"] = run.Tool(
            "pystack", "pystack core", lambda core: [PYSTACK, "core", core, exe],
            run.check_pystack, False, retry_big_stack=True)
    return tools


def make_core(exe, depth, directory):
    """Run deep.py DEPTH under EXE, gcore it once it is ready, kill it; return the core's path.

    gcore writes a mapping holding MADV_GUARD_INSTALL guard pages (thread stacks of sid's
    glibc) as zeros; deep.py is single-threaded, but such mappings are re-read page by page
    anyway (harness.refill_guarded_mappings), and the frame checks would catch a hole."""
    child = subprocess.Popen(
        [exe, run.DEEP_PY, str(depth)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=harness.child_env(), start_new_session=True,
    )
    try:
        ready, _, _ = select.select([child.stdout], [], [], run.READY_TIMEOUT_S)
        line = child.stdout.readline().decode() if ready else ""
        if not line.startswith("ready"):
            child.kill()
            _, err = child.communicate()
            raise run.Failure(
                f"{exe} deep.py {depth} did not get ready (got {line!r}); stderr:\n"
                f"{run.tail(err.decode('utf-8', 'replace'))}")
        prefix = os.path.join(directory, f"core-{os.path.basename(exe)}")
        gcore = subprocess.run(
            ["gcore", "-o", prefix, str(child.pid)], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=run.child_env(), timeout=600,
        )
        core = f"{prefix}.{child.pid}"
        if gcore.returncode != 0 or not os.path.isfile(core):
            raise run.Failure(
                f"gcore failed for {exe} deep.py {depth} (status {gcore.returncode}):\n"
                f"{run.tail(gcore.stderr.decode('utf-8', 'replace'))}")
        harness.refill_guarded_mappings(core, child.pid)
        return core
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


def check_setup(interps):
    problems = []
    for interp in interps:
        if not os.access(interp.exe, os.X_OK):
            problems.append(f"{interp.exe} is missing ("
                            + ("make pythons" if interp.exe.startswith(SID) else "apt-get install")
                            + ")")
    for prog in ("gdb", "gcore"):
        if shutil.which(prog) is None:
            problems.append(f"{prog} is not on PATH")
    if not os.path.isfile(run.GDB_SCRIPT) or not os.access(run.CLI, os.X_OK):
        problems.append("ours: not built (make build)")
    if problems:
        print("bench: cannot run:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        raise SystemExit(2)


# ---- report -------------------------------------------------------------------------------

def lib_over_ours(res):
    """libpython/ours, both beyond gdb start-up; a libpython timeout gives a lower bound."""
    lib, ours, base = res.get("libpython"), res.get("ours-gdb"), res.get("baseline")
    if lib is None or lib.failure or base is None or base.median is None:
        return "-"
    slow = (lib.timeout if lib.timeout else lib.median) - base.median
    return run.ratio(slow, run.beyond(ours, base), bool(lib.timeout))


def print_table(rows):
    header = ["seconds, median", "version", "baseline", "ours py-bt", "beyond start-up",
              "libpython py-bt", "libpython/ours", "pystack", "CLI"]
    lines = [header]
    for interp, version, res in rows:
        lines.append([
            interp.name, version, run.fmt_time(res.get("baseline")), run.fmt_time(res.get("ours-gdb")),
            run.fmt_seconds(run.beyond(res.get("ours-gdb"), res.get("baseline"))),
            run.fmt_time(res.get("libpython")), lib_over_ours(res), run.fmt_time(res.get("pystack")),
            run.fmt_time(res.get("ours-cli")),
        ])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def fmt(cells):
        return "  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i])
                         for i, c in enumerate(cells))

    print(fmt(header))
    print("  ".join("-" * w for w in widths))
    for line in lines[1:]:
        print(fmt(line))


# ---- main ---------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=DEPTH, metavar="N",
                        help=f"frames of recurse() on the stack (default {DEPTH})")
    parser.add_argument("--repeat", type=int, default=REPEAT, metavar="K",
                        help=f"runs per measurement, median reported (default {REPEAT})")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="per-command time limit in seconds (default 600)")
    parser.add_argument("--keep-cores", action="store_true",
                        help="keep the core directory and print its path")
    args = parser.parse_args(argv)
    if args.depth < 1 or args.repeat < 1:
        parser.error("--depth and --repeat must be >= 1")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    interps = interpreters()
    check_setup(interps)
    pystack = (f"pystack {run.version_of([PYSTACK, '--version'])}"
               if os.access(PYSTACK, os.X_OK) else f"no pystack at {PYSTACK}")
    print(f"bench: {run.version_of(['gdb', '--version'])}; {pystack}; deep.py {args.depth}; "
          f"{args.repeat} run(s) each, median; timeout {args.timeout:.0f} s", flush=True)

    os.makedirs(CACHE, exist_ok=True)
    core_dir = tempfile.mkdtemp(prefix="bench-versions-", dir=CACHE)
    rows, notes = [], []
    verdicts = Verdicts()
    try:
        for interp in interps:
            version = run.version_of([interp.exe, "--version"]).replace("Python ", "")
            tools = make_tools(interp)
            if "libpython" not in tools:
                verdicts.not_measured(f"{interp.name} libpython.py py-bt",
                                      f"no {os.path.basename(interp.exe)}-gdb.py found")
            if "pystack" not in tools:
                verdicts.not_measured(f"{interp.name} pystack core",
                                      f"{PYSTACK} missing (bench/setup.sh installs it)")
            try:
                core = make_core(interp.exe, args.depth, core_dir)
            except run.Failure as exc:
                verdicts.failed(f"{interp.name} core of deep.py {args.depth}", exc, detail=exc)
                continue
            # Untimed: brings gdb, this interpreter's debug info and the tools into the cache.
            for name in ("baseline", "pystack", "ours-cli"):
                if name in tools:
                    try:
                        run.run_timed(tools[name].argv_for(core), args.timeout)
                    except run.Timeout:
                        pass
            results = {}
            for name in ORDER:
                if name not in tools:
                    continue
                tool = tools[name]
                print(f"bench: {interp.name} {tool.label} ...", file=sys.stderr, flush=True)
                result = run.measure(tool, core, args.depth, args.repeat, args.timeout)
                results[name] = result
                what = f"{interp.name} {tool.label}"
                if result.crash_note:
                    notes.append(f"{what}: {result.crash_note}")
                if (result.failure and name == "libpython"
                        and LIBPYTHON_NO_FRAME in result.failure
                        and eval_frame_optimized_out(interp, core)):
                    verdicts.peer_limit(what, f"it prints {LIBPYTHON_NO_FRAME!r}: the eval "
                                              "loop's `frame` argument is optimized out in "
                                              "this build (gdb's bt)")
                elif result.failure:
                    record = verdicts.failed if name in OURS else verdicts.not_measured
                    record(what, result.failure, detail=result.failure)
                elif result.timeout:
                    verdicts.not_measured(what, f"timed out after {result.timeout:.0f} s "
                                                "(shown as a lower bound)")
            rows.append((interp, version, results))
            if not args.keep_cores:
                os.remove(core)  # one core on disk at a time
    finally:
        if args.keep_cores:
            print(f"bench: cores kept in {core_dir}")
        else:
            shutil.rmtree(core_dir, ignore_errors=True)

    print()
    print(f"py-bt on a core of deep.py {args.depth} ({args.depth} frames of recurse), "
          "per interpreter")
    print_table(rows)
    print("beyond start-up = ours py-bt - baseline; libpython/ours compares both beyond start-up")
    for note in notes:
        print(f"note: {note}")
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
