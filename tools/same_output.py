#!/usr/bin/env python3
"""Show that a change leaves behaviour alone: the CLI's, gdb's and lldb's output on a fixed
corpus of real cores, made before and after the change, compared byte for byte.

    PY=$(bash tools/test-env.sh | tail -n 1)        # the test venv (pytest: make-corpus only)
    $PY tools/same_output.py make-corpus /work/corpus
    $PY tools/same_output.py run /work/corpus OUT_BEFORE --checkout OLD_TREE \\
        --lib OLD/_pyunwind.so --cli OLD/pyunwind
    $PY tools/same_output.py run /work/corpus OUT_AFTER           # this checkout's build
    $PY tools/same_output.py diff OUT_BEFORE OUT_AFTER            # exit 1 on any difference

`make-corpus DIR` makes, once, the cores listed in SCENARIOS and CRASHES: gcore cores of the
scenario programs (started as the tests start them, by tests/integration/harness.py's
`Scenario`) under pyenv's 3.10, 3.12 (and its stripped libpython), 3.13, Debian's stripped
3.11, sid's 3.14 (one core with PYTHON_JIT=1, one with its debug info visible) and 3.15, and the
free-threaded 3.13t; and kernel cores of tests/integration/test_crash.py's crasher (fatal
signals), plus one core gdb writes at such a crash. The scenario programs are copied into
DIR/scenarios first and run from there, so file names and source lines in the output do not
depend on any checkout. Each core is DIR/cores/ID.core with ID.json, its manifest (the
interpreter's id, the executable, the environment it ran in, the debug directory gdb may
use, the scenario and its arguments, how the core was made, and the sha256 of every file the
output depends on: those the core maps, their separate debug files, the source files of its
frames) and ID.truth.json, the truth the program recorded. A core already there is kept
(--remake REGEX makes those again); DIR/corpus.json lists them when all are made. `run`
refuses a corpus with a file changed since (an upgraded package): both sides must read the
same files. Zeros in the cores are holes in their files (fallocate --dig-holes): the free-threaded
build's 1 GiB cores take 10 MiB of disk.

`run DIR OUTDIR` runs, for every core, each command of CLI_COMMANDS (`pyunwind core CORE --exe
EXE ...`), of GDB_COMMANDS (`gdb -batch` with the checkout's gdb-scripts/pyunwind-gdb.py, one
gdb per command) and of LLDB_COMMANDS (`lldb -b` with the checkout's
lldb-scripts/pyunwind_lldb.py, one lldb per command), two at a time (--jobs, at most 2), and
writes OUTDIR/ID/TOOL_COMMAND.txt: the command line, the exit status, stdout and stderr,
after the normalisations of NORMALISATIONS (nothing else is touched). For lldb, the command's
result (its output, its error, whether it succeeded), which LLDB_WRAPPER writes to a file, takes
the place of lldb's stdout: that holds the core's stop, which lldb's event-handler thread
prints at a different point in each run. (A py-* output over 1 MiB, which the lldb script
writes straight to lldb's stream, would be missed: no core of the corpus has one.)
--checkout (default: this checkout) gives the scripts; --lib (default
CHECKOUT/target/release/_pyunwind.so, handed to the scripts as $PYUNWIND_LIB) and --cli
(default CHECKOUT/target/release/pyunwind) the build; --gdb and --lldb (default $PYUNWIND_LLDB,
else `lldb`) the debuggers, whose versions go to OUTDIR/versions.txt (compared like the
outputs: a run with another lldb is no comparison). --only REGEX and --tools cli,gdb,lldb run a
part. OUTDIR/run-info.json (paths, counts, seconds) is the one file `diff` leaves out. Every
command runs in the same small environment (command_env), not the caller's, with the core's
own environment on top (LD_LIBRARY_PATH of a stripped copy), as the tests run the debuggers.

`diff OUT_A OUT_B` prints, per file, `equal` or `DIFFERS` (with its first differing lines) or
`only in A|B`, then a summary; exit status 1 on any difference (--quiet: differences only).
"""

import argparse
import concurrent.futures
import difflib
import hashlib
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
import corefile  # noqa: E402
import harness  # noqa: E402

# --- the corpus -----------------------------------------------------------------------------

# Interpreters (harness ids) every plain scenario runs on.
MATRIX = ("pyenv-3.10", "pyenv-3.12", "pyenv-3.12-stripped", "pyenv-3.13", "debian-3.11",
          "debian-3.14", "debian-3.15", "ft-3.13t")
NO_310 = tuple(i for i in MATRIX if i != "pyenv-3.10")
# gevent has no free-threaded wheel (tests/integration/test_greenlets.py, GEVENT_ABSENT).
WITH_GEVENT = tuple(i for i in MATRIX if i != "ft-3.13t")
ASYNC_LOCKS = ("pyenv-3.12", "pyenv-3.13", "debian-3.11", "debian-3.14", "debian-3.15")
CASES = "asyncio/cases.py"

# (name in the core's id, script under tests/scenarios, its arguments, extra environment,
# interpreters). "greenlet" in the environment stands for tools/greenlet.sh's `latest` set of
# the interpreter's ABI. asyncio on 3.10 is there for its refusal.
SCENARIOS = (
    ("threads", "threads.py", (), {}, MATRIX),
    ("locals", "locals.py", (), {}, MATRIX),
    ("why_waits", "why_waits.py", (), {}, MATRIX),
    ("why_with_deadlock", "why_with_deadlock.py", (), {}, ("pyenv-3.12", "debian-3.14",
                                                           "ft-3.13t")),
    ("gather", CASES, ("gather", "c"), {}, MATRIX),
    ("taskgroup", CASES, ("taskgroup", "c"), {}, NO_310),
    ("gather-py", CASES, ("gather", "py"), {}, ("pyenv-3.12", "debian-3.14")),
    ("cycle", CASES, ("cycle", "c"), {}, ("debian-3.11", "debian-3.15")),
    ("why_async_locks", "why_async_locks.py", (), {}, ASYNC_LOCKS),
    ("greenlets_gevent", "greenlets_gevent.py", (), {"PYUNWIND_GREENLET": "greenlet"},
     WITH_GEVENT),
    ("greenlets_raw", "greenlets_raw.py", (), {"PYUNWIND_GREENLET": "greenlet"},
     ("pyenv-3.12", "ft-3.13t")),
    ("native_mix", "native_mix.py", (), {}, ("pyenv-3.12", "debian-3.11", "debian-3.14")),
    ("jit_call-jit", "jit_call.py", (), {"PYTHON_JIT": "1"}, ("debian-3.14",)),
    ("threads", "threads.py", (), {}, ("debian-3.14-dbgsym",)),
)

# Crash cores of tests/integration/test_crash.py's crasher: (interpreter, kind, thread, how).
# `kernel`: the kernel's core (core_pattern `core`); `gdb`: gcore run by gdb at the signal.
CRASHES = (
    ("pyenv-3.12", "segv", "worker", "kernel"),
    ("debian-3.11", "abort", "main", "kernel"),
    ("debian-3.15", "segv", "main", "kernel"),
    ("pyenv-3.13", "segv", "worker", "gdb"),
)
CRASH_TIMEOUT_SECONDS = 120


def _interps():
    return {i.id: i for i in harness.interpreters() + harness.provisioned_interpreters()}


def _scenario_env(interp, extra):
    """``extra`` with "greenlet" replaced by the folder for the interpreter's ABI."""
    env = {}
    for key, value in extra.items():
        if value == "greenlet":
            import test_greenlets  # its folder for the interpreter's ABI, checked to be there

            value = str(test_greenlets.greenlet_dir(interp))
        env[key] = value
    return env


# Where a debugger or the CLI may find separate debug info for a mapped file, by build-id.
DEBUG_ROOTS = ("/usr/lib/debug",)


def _truth_files(value):
    """The absolute paths under a "file" key anywhere in a truth (its frames' source files)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "file" and isinstance(item, str) and item.startswith("/"):
                yield item
            else:
                yield from _truth_files(item)
    elif isinstance(value, list):
        for item in value:
            yield from _truth_files(item)


def _inputs(core, truth, debug_dir):
    """Every file whose change would change the output on ``core``: the files it maps (its
    NT_FILE note), the separate debug files found for them by build-id, and the source files
    its truth names (py-bt prints their lines)."""
    paths = {p for _, _, _, p in corefile.CoreFile(core).mapped_files()}
    roots = DEBUG_ROOTS + ((debug_dir,) if debug_dir else ())
    for path in sorted(paths):
        try:
            bid = harness.build_id(path)
        except (OSError, harness.HarnessError):
            continue
        if bid:
            paths.update(os.path.join(r, ".build-id", bid[:2], bid[2:] + ".debug") for r in roots)
    return sorted(paths | set(_truth_files(truth)))


_digests = {}


def _digest(path):
    """sha256 of the file at ``path``, None when there is none (memoized for one run)."""
    if path not in _digests:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            _digests[path] = h.hexdigest()
        except OSError:
            _digests[path] = None
    return _digests[path]


def stale(manifest):
    """The files of a core's manifest that differ now from when the core was made."""
    if "files" not in manifest:
        return ["(no fingerprints in its manifest)"]
    return [p for p, d in sorted(manifest["files"].items()) if _digest(p) != d]


def _write_json(path, data):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _keep_core(src, cores, core_id, manifest, truth):
    """Moves the core ``src`` to CORES/ID.core and writes its truth and, last, its manifest."""
    dest = cores / (core_id + ".core")
    shutil.move(str(src), str(dest) + ".tmp")
    # Zeros become holes, the bytes read stay the same: a free-threaded build's core is 1 GiB
    # of mostly zeros (mimalloc's reservations), 10 MiB on disk so.
    rc, out, err = harness.run(["fallocate", "--dig-holes", str(dest) + ".tmp"], 300)
    if rc != 0:
        raise harness.HarnessError("fallocate --dig-holes %s.tmp: %s" % (dest, err))
    os.replace(str(dest) + ".tmp", dest)
    inputs = _inputs(dest, truth, manifest["debug_dir"]) + [manifest["script"]]
    files = {p: _digest(p) for p in inputs}
    manifest = dict(manifest, id=core_id, core=dest.name, size=dest.stat().st_size, files=files)
    _write_json(cores / (core_id + ".truth.json"), truth)
    _write_json(cores / (core_id + ".json"), manifest)
    return manifest


def _interp_fields(interp, env):
    return {"interp": interp.id, "exe": interp.exe, "env": env, "debug_dir": interp.debug_dir,
            "python": None}


def make_scenario_core(corpus, interp, name, script, args, extra_env):
    core_id = "%s.%s" % (interp.id, name)
    extra = _scenario_env(interp, extra_env)
    path = corpus / "scenarios" / script
    label = "asyncio-" + args[0] if script == CASES else pathlib.Path(script).stem
    with harness.Scenario(interp, label, script=path, args=args, env=extra) as s:
        core = s.make_core()
        manifest = dict(_interp_fields(interp, dict(interp.env, **extra)),
                        python=s.truth.get("python"), scenario=name, script=str(path),
                        args=list(args), pid=s.pid, made_by="gcore")
        return _keep_core(core, corpus / "cores", core_id, manifest, s.truth)


def make_crash_core(corpus, interp, kind, where, how):
    import test_crash  # the crasher and its `ulimit -c unlimited` wrapper

    core_id = "%s.crash-%s-%s-%s" % (interp.id, kind, where, how)
    work = corpus / "crash" / core_id
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    script = work / "crasher.py"
    script.write_text(test_crash.CRASHER)
    truth_path = work / "truth.json"
    env = harness.child_env(interp.env)
    if how == "kernel":
        with open("/proc/sys/kernel/core_pattern", encoding="ascii") as f:
            if f.read().strip() != "core":
                raise harness.HarnessError("a kernel crash core needs core_pattern `core`")
        rc, out, err = harness.run(["sh", "-c", test_crash.WRAPPER, interp.exe, script, kind,
                                    where, truth_path], CRASH_TIMEOUT_SECONDS, cwd=str(work),
                                   env=env)
        made = sorted(work.glob("core*"))
        if rc == 0 or len(made) != 1:
            raise harness.HarnessError("%s: no one kernel core (rc %d, %s): %s"
                                       % (core_id, rc, made, err))
        core = made[0]
    else:
        core = work / "gdb.core"
        env.pop("DEBUGINFOD_URLS", None)
        rc, out, err = harness.run(["gdb", "-q", "-batch", "-nx", "-iex", "set auto-load off",
                                    "-iex", "set debuginfod enabled off", "-ex", "run",
                                    "-ex", "gcore %s" % core, "--args", interp.exe, script,
                                    kind, where, truth_path], CRASH_TIMEOUT_SECONDS,
                                   cwd=str(work), env=env)
        if not core.is_file():
            raise harness.HarnessError("%s: gdb wrote no core: %s%s" % (core_id, out, err))
    truth = json.loads(truth_path.read_text())
    manifest = dict(_interp_fields(interp, dict(interp.env)),
                    scenario="crash-%s-%s" % (kind, where), script=str(script),
                    args=[kind, where, str(truth_path)], pid=truth["pid"],
                    made_by="kernel" if how == "kernel" else "gdb gcore at the signal")
    return _keep_core(core, corpus / "cores", core_id, manifest, truth)


def make_corpus(corpus, remake=None):
    corpus = pathlib.Path(corpus).resolve()
    cores = corpus / "cores"
    if remake:
        gone = [m for m in cores.glob("*.json")
                if not m.name.endswith(".truth.json") and re.search(remake, m.name[:-5])]
        for m in gone:
            for path in (m, m.with_suffix(".core"), m.with_suffix(".truth.json")):
                path.unlink(missing_ok=True)
        print("removed %d cores to make again" % len(gone))
        (corpus / "corpus.json").unlink(missing_ok=True)
    if (corpus / "corpus.json").is_file():
        print("%s: the corpus is there already (corpus.json); nothing to do" % corpus)
        return 0
    cores.mkdir(parents=True, exist_ok=True)
    if not (corpus / "scenarios").is_dir():
        shutil.copytree(harness.scenarios_dir(), corpus / "scenarios.tmp",
                        ignore=shutil.ignore_patterns("__pycache__"))
        os.replace(corpus / "scenarios.tmp", corpus / "scenarios")
    interps = _interps()
    jobs = [("scenario", interps[i], entry) for entry in SCENARIOS for i in entry[4]]
    jobs += [("crash", interps[c[0]], c) for c in CRASHES]
    started = time.monotonic()
    made = []
    for what, interp, entry in jobs:
        core_id = "%s.%s" % (interp.id, entry[0] if what == "scenario"
                             else "crash-%s-%s-%s" % entry[1:])
        if (cores / (core_id + ".json")).is_file():
            made.append(json.loads((cores / (core_id + ".json")).read_text()))
            continue
        t0 = time.monotonic()
        if what == "scenario":
            m = make_scenario_core(corpus, interp, *entry[:4])
        else:
            m = make_crash_core(corpus, interp, *entry[1:])
        made.append(m)
        print("%-45s %6.1f MiB %5.1f s" % (core_id, m["size"] / 2**20, time.monotonic() - t0),
              flush=True)
    index = {"cores": sorted(m["id"] for m in made),
             "bytes": sum(m["size"] for m in made),
             "scenarios_from": str(harness.repo_root())}
    _write_json(corpus / "corpus.json", index)
    print("%d cores, %.1f GiB, made in %.0f s" % (len(made), index["bytes"] / 2**30,
                                                  time.monotonic() - started))
    return 0


# --- running the commands -------------------------------------------------------------------

# `pyunwind core CORE --exe EXE --debug-file-directory DIR` plus each of these.
CLI_COMMANDS = (
    (), ("--json",), ("--native",), ("--native", "--json"), ("--native-all",),
    ("--async",), ("--async", "--json"), ("--tasks",), ("--tasks", "--json"),
    ("--why",), ("--why", "--json"), ("--greenlets",), ("--greenlets", "--json"),
    ("--locals",), ("--locals", "--json"), ("--group",), ("--group", "--json"),
    ("--heap",), ("--heap", "--json"),
)
# The py-* commands both debuggers have (docs/debugger-commands.md), then each one's own.
PY_COMMANDS = (
    "py-bt", "py-bt --json", "py-bt -a", "py-bt -a --json", "py-bt-full", "py-bt-full -a --json",
    "py-locals", "py-list", "py-up", "py-why", "py-why --json", "py-tasks", "py-tasks --json",
    "py-bt-async", "py-bt-async --json", "py-greenlets", "py-greenlets --json",
)
GDB_COMMANDS = PY_COMMANDS + ("bt", "thread apply all bt")
LLDB_COMMANDS = PY_COMMANDS + ("bt", "thread backtrace all")
COMMAND_TIMEOUT_SECONDS = 300
MAX_JOBS = 2

# What differs from run to run and is replaced, each rule named: (name, why, the values it
# replaces (from the run's settings), what it writes instead). Paths are replaced as given and
# as resolved (target/ may be a link). Nothing else is: the cores, the corpus's paths and the
# commands are the same in every run. No output of the base runs held a pid of the tool itself
# or a time.
NORMALISATIONS = (
    ("lib", "the _pyunwind module (--lib): the build under test sits elsewhere in each run",
     lambda s: [s.lib], b"<lib>"),
    ("cli", "the CLI (--cli), for the same reason", lambda s: [s.cli], b"<cli>"),
    ("checkout", "the tree whose gdb and lldb scripts run (--checkout): the script paths gdb "
     "and lldb echo and print in tracebacks", lambda s: [s.checkout], b"<checkout>"),
    ("outdir", "OUTDIR, where lldb's result files are written: named on lldb's command line",
     lambda s: [s.outdir], b"<out>"),
    ("lldb-stdout", "lldb's own terminal output is not kept, only each command's result "
     "(LLDB_WRAPPER): lldb's event-handler thread prints the core's stop (every thread with "
     "its frame 0, through our frame provider) at a time that varies from run to run, in "
     "the middle of the commands' echo and output", lambda s: [], b""),
)


class Settings:
    def __init__(self, args):
        self.outdir = os.path.abspath(args.outdir)
        self.checkout = str(pathlib.Path(args.checkout or REPO).resolve())
        self.lib = os.path.abspath(args.lib or os.path.join(self.checkout, "target", "release",
                                                            "_pyunwind.so"))
        self.cli = os.path.abspath(args.cli or os.path.join(self.checkout, "target", "release",
                                                            "pyunwind"))
        self.gdb = args.gdb
        self.lldb = args.lldb or os.environ.get("PYUNWIND_LLDB") or shutil.which("lldb") or "lldb"
        self.gdb_script = os.path.join(self.checkout, "gdb-scripts", "pyunwind-gdb.py")
        self.lldb_script = os.path.join(self.checkout, "lldb-scripts", "pyunwind_lldb.py")
        for what, path in (("--lib", self.lib), ("--cli", self.cli),
                           ("gdb script", self.gdb_script), ("lldb script", self.lldb_script)):
            if not os.path.isfile(path):
                raise SystemExit("same_output: %s %s is missing" % (what, path))
        # Longest first, so that a path inside another is replaced before it.
        pairs = []
        for name, _, values, token in NORMALISATIONS:
            for value in values(self):
                for form in (value, os.path.realpath(value)):
                    pairs.append((form.encode(), token))
        self.replacements = sorted(set(pairs), key=lambda p: -len(p[0]))


def normalise(data, settings):
    for old, new in settings.replacements:
        data = data.replace(old, new)
    return data


def command_env(manifest, settings):
    """The environment of every command: the same in every run, whoever starts it."""
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
           "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1", "PYUNWIND_LIB": settings.lib}
    env.update(manifest["env"])
    return env


def slug(text):
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", text).strip("_")


# lldb runs each command through this one-liner: the command's result (what lldb prints for it)
# goes to a file of its own, apart from lldb's terminal output (see NORMALISATIONS).
LLDB_WRAPPER = (
    "script _r = lldb.SBCommandReturnObject(); {select}"
    "lldb.debugger.GetCommandInterpreter().HandleCommand({command!r}, _r); "
    "open({path!r}, 'w', encoding='utf-8', errors='surrogateescape').write("
    "'--- result: %s\\n--- output\\n%s--- error\\n%s' % ("
    "'succeeded' if _r.Succeeded() else 'failed', _r.GetOutput() or '', _r.GetError() or ''))")
LLDB_SETTLE_SECONDS = 0.3
# The main thread, as tests/integration/test_lldb.py selects it (the truth lists it first); a
# crash core keeps lldb's choice, the thread that crashed.
LLDB_SELECT_MAIN = "lldb.process.SetSelectedThreadByID(lldb.process.GetProcessID()); "


def commands_for(manifest, corpus, outdir, settings, tools):
    """(file name, argv, lldb's result file or None) of every command of ``tools`` on one
    core."""
    core = str(corpus / "cores" / manifest["core"])
    exe = manifest["exe"]
    # As gdb's `set debug-file-directory` below: no -dbg package a bench run may have installed.
    debug = ["--debug-file-directory", manifest["debug_dir"] or "/nonexistent"]
    out = []
    for flags in CLI_COMMANDS if "cli" in tools else ():
        out.append(("cli" + ("_" + slug(" ".join(flags)) if flags else ""),
                    [settings.cli, "core", core, "--exe", exe, *debug, *flags], None))
    for c in GDB_COMMANDS if "gdb" in tools else ():
        out.append(("gdb_" + slug(c), [
            settings.gdb, "-q", "-batch", "-nx", "-iex", "set auto-load off",
            # A user without the -dbg packages has none (as tests/integration/test_stacks.py).
            "-iex", "set debug-file-directory %s" % (manifest["debug_dir"] or "/nonexistent"),
            "-iex", "set debuginfod enabled off", "-x", settings.gdb_script, "-ex", c, exe, core],
            None))
    for c in LLDB_COMMANDS if "lldb" in tools else ():
        name = "lldb_" + slug(c)
        result = str(outdir / (name + ".result"))
        select = "" if manifest["scenario"].startswith("crash-") else LLDB_SELECT_MAIN
        out.append((name, [
            settings.lldb, "-b", "--no-lldbinit",
            "-O", "settings set symbols.enable-external-lookup false", exe, "-c", core,
            "-o", "command script import %s" % settings.lldb_script,
            # As tests/integration/test_lldb.py: let lldb's event-handler thread print the
            # core's stop first. A thread whose frames it asks for while the command holds the
            # target's lock gets lldb's own frames from our provider, and keeps them: without
            # the wait, `thread backtrace all` showed Python frames for a different set of
            # threads from run to run (31 of 69 cores differed between two runs).
            "-o", "script import time; time.sleep(%s)" % LLDB_SETTLE_SECONDS,
            "-o", LLDB_WRAPPER.format(select=select, command=c, path=result)], result))
    return out


def run_one(argv, env, result, settings):
    """The record of one command: its command line, exit status, stdout (lldb: the command's
    result instead) and stderr."""
    parts = [b"$ ", shlex.join(argv).encode(), b"\n"]
    try:
        rc, out, err = harness.run(argv, COMMAND_TIMEOUT_SECONDS, env=env, text=False)
        parts.append(("exit %d" % rc if rc >= 0 else "signal %d" % -rc).encode())
    except harness.HarnessError:
        out, err = b"", b""
        parts.append(b"timeout after %d s" % COMMAND_TIMEOUT_SECONDS)
    if result is None:
        parts += [b"\n--- stdout\n", out]
    elif os.path.isfile(result):
        with open(result, "rb") as f:
            parts += [b"\n", f.read()]
        os.unlink(result)
    else:
        parts += [b"\n--- no result (the wrapper failed); lldb's stdout:\n", out]
    parts += [b"\n--- stderr\n", err]
    return normalise(b"".join(parts), settings)


def tool_versions(settings, tools):
    lines = []
    for argv in ([settings.gdb, "--version"] if "gdb" in tools else None,
                 [settings.lldb, "--version"] if "lldb" in tools else None):
        if argv is None:
            continue
        rc, out, err = harness.run(argv, 60)
        lines.append("%s: %s" % (os.path.basename(argv[0]), (out or err).splitlines()[0]))
    return "\n".join(lines) + "\n"


def run(corpus, outdir, settings, jobs, only, tools):
    corpus = pathlib.Path(corpus).resolve()
    if not (corpus / "corpus.json").is_file():
        raise SystemExit("same_output: %s has no corpus.json (run make-corpus)" % corpus)
    index = json.loads((corpus / "corpus.json").read_text())
    manifests = [json.loads((corpus / "cores" / (core_id + ".json")).read_text())
                 for core_id in index["cores"] if not only or re.search(only, core_id)]
    changed = {m["id"]: stale(m) for m in manifests}
    changed = {k: v for k, v in changed.items() if v}
    if changed:
        for core_id, paths in sorted(changed.items()):
            print("stale: %s: %s changed since the core was made" % (core_id, ", ".join(paths)),
                  file=sys.stderr)
        raise SystemExit("same_output: %d cores are stale (an upgraded package?): make them "
                         "again (make-corpus DIR --remake REGEX) and run both sides again"
                         % len(changed))
    outdir = pathlib.Path(settings.outdir)
    if outdir.exists() and any(outdir.iterdir()):
        raise SystemExit("same_output: %s is not empty" % outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    work = []
    for manifest in manifests:
        core_id = manifest["id"]
        env = command_env(manifest, settings)
        (outdir / core_id).mkdir()
        for name, argv, result in commands_for(manifest, corpus, outdir / core_id, settings,
                                               tools):
            work.append((outdir / core_id / (name + ".txt"), argv, env, result))
    (outdir / "versions.txt").write_text(tool_versions(settings, tools))
    started = time.monotonic()
    done, lock = [0], threading.Lock()

    def one(item):
        path, argv, env, result = item
        path.write_bytes(run_one(argv, env, result, settings))
        with lock:
            done[0] += 1
            if done[0] % 100 == 0 or done[0] == len(work):
                print("%d/%d commands, %.0f s" % (done[0], len(work), time.monotonic() - started),
                      file=sys.stderr, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(one, item) for item in work]:
            f.result()
    seconds = time.monotonic() - started
    info = {"checkout": settings.checkout, "lib": settings.lib, "cli": settings.cli,
            "gdb": settings.gdb, "lldb": settings.lldb, "cores": len({w[0].parent for w in work}),
            "outputs": len(work), "seconds": round(seconds, 1), "jobs": jobs,
            "tools": sorted(tools), "only": only,
            "normalisations": [n[0] for n in NORMALISATIONS]}
    _write_json(outdir / "run-info.json", info)
    print("%d outputs of %d cores in %s, %.0f s" % (len(work), info["cores"], outdir, seconds))
    return 0


# --- comparing two runs ---------------------------------------------------------------------

NOT_COMPARED = {"run-info.json"}
DIFF_LINES = 12


def _files(root):
    root = pathlib.Path(root)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} - NOT_COMPARED


def diff(a, b, quiet):
    a, b = pathlib.Path(a), pathlib.Path(b)
    for d in (a, b):
        if not (d / "versions.txt").is_file():
            raise SystemExit("same_output: %s is no output of `run`" % d)
    in_a, in_b = _files(a), _files(b)
    counts = {"equal": 0, "differ": 0, "only": 0}
    for rel in sorted(in_a | in_b):
        if rel not in in_b or rel not in in_a:
            print("only in %s: %s" % ("A" if rel in in_a else "B", rel))
            counts["only"] += 1
            continue
        da, db = (a / rel).read_bytes(), (b / rel).read_bytes()
        if da == db:
            counts["equal"] += 1
            if not quiet:
                print("equal    %s" % rel)
            continue
        counts["differ"] += 1
        print("DIFFERS  %s" % rel)
        lines = difflib.unified_diff(da.decode("utf-8", "replace").splitlines(),
                                     db.decode("utf-8", "replace").splitlines(),
                                     "A/" + rel, "B/" + rel, n=1, lineterm="")
        for i, line in enumerate(lines):
            if i >= DIFF_LINES + 2:
                print("    ...")
                break
            print("    " + line)
    print("%d files: %d equal, %d differ, %d in one run only"
          % (sum(counts.values()), counts["equal"], counts["differ"], counts["only"]))
    return 1 if counts["differ"] or counts["only"] else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-corpus", help="make the corpus of cores, once")
    m.add_argument("dir")
    m.add_argument("--remake", metavar="REGEX",
                   help="make the cores whose id matches again (`run` names the stale ones)")
    r = sub.add_parser("run", help="run every command on every core")
    r.add_argument("dir")
    r.add_argument("outdir")
    r.add_argument("--checkout", help="tree whose gdb/lldb scripts run (default: this one)")
    r.add_argument("--lib", help="the _pyunwind module (default CHECKOUT/target/release)")
    r.add_argument("--cli", help="the pyunwind CLI (default CHECKOUT/target/release)")
    r.add_argument("--gdb", default="gdb")
    r.add_argument("--lldb", help="default: $PYUNWIND_LLDB, else lldb on PATH")
    r.add_argument("--jobs", type=int, default=MAX_JOBS, choices=range(1, MAX_JOBS + 1))
    r.add_argument("--only", help="only the cores whose id matches this regular expression")
    r.add_argument("--tools", default="cli,gdb,lldb",
                   help="which of cli, gdb, lldb to run (default: all three)")
    d = sub.add_parser("diff", help="compare two runs' outputs")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--quiet", action="store_true", help="print differences only")
    args = p.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `diff A B | head` ends quietly
    if args.cmd == "make-corpus":
        return make_corpus(args.dir, args.remake)
    if args.cmd == "run":
        tools = set(args.tools.split(","))
        if not tools <= {"cli", "gdb", "lldb"}:
            p.error("--tools: cli, gdb or lldb")
        return run(args.dir, args.outdir, Settings(args), args.jobs, args.only, tools)
    return diff(args.a, args.b, args.quiet)


if __name__ == "__main__":
    sys.exit(main())
