"""`pyunwind core|pid --native`: native frames interleaved with Python frames.

One process per interpreter (tests/scenarios/native_mix.py: a signal handler running during a
ctypes callback from libc's qsort, under `map` and a `sorted` key; workers blocked in a lock
and a pipe read), read live and from one gcore core, checked against independent references:
plain gdb's unwinding of the same core (every native PC, name, file and line; pyunwind's gdb
script is not loaded), `pystack --native` (where the Python frames sit among the native ones)
and the scenario's truth (every thread and its Python frames).
"""

import copy
import json
import os
import pathlib
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import pytest

import jit_harness as jh
from corefile import CoreFile
from harness import (Interp, Scenario, all_stopped, cache_dir, cli_path, gdb_argv, interpreters,
                     provisioned_interpreters, repo_root, run)

INTERP_IDS = ("pyenv-3.10", "pyenv-3.10-stripped", "pyenv-3.12", "pyenv-3.12-stripped", "pyenv-3.13",
              "debian-3.11", "debian-3.14",
              "debian-3.15",
              "debian-3.14-jit", "debian-3.15-jit", "pyenv-3.11-cext", "debian-3.11-cext",
              "pyenv-3.12-minidebuginfo", "ft-3.13t")
# pystack reads 3.10 to 3.13 (and needs its own symbols of the eval loop: on sid's stripped
# 3.14 it prints "Unable to merge native stack").
PYSTACK_IDS = ("pyenv-3.10", "pyenv-3.12", "pyenv-3.13", "debian-3.11", "pyenv-3.11-cext", "debian-3.11-cext")
TIMEOUT = 120
# What `time.thread_time()` makes the vDSO call (linux/time.h CLOCK_THREAD_CPUTIME_ID; x86-64's
# syscall table, arch/x86/entry/syscalls/syscall_64.tbl: clock_gettime).
SYS_CLOCK_GETTIME = 228
CLOCK_THREAD_CPUTIME_ID = 3
# Plain gdb unwinds through JIT code only where CPython registers that code with gdb's JIT
# interface (3.15: a `py::jit:executor` symbol and CFI for rip/rsp/rbp). 3.14 registers nothing
# and its JIT code has no unwind information anywhere, so gdb's frames older than a 3.14 JIT
# frame are junk.
GDB_UNWINDS_JIT_FROM_MINOR = 15
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")


def _interp(interp_id):
    for i in interpreters() + provisioned_interpreters():
        if i.id == interp_id.replace("-jit", "").replace("-cext", ""):
            return i
        if interp_id == i.id + "-minidebuginfo":
            lib = _mini_debug_info_libpython(i)
            return Interp(interp_id, i.exe, {"LD_LIBRARY_PATH": str(lib.parent)}, i.minor, True,
                          str(lib))
    raise AssertionError("no interpreter %s in the test matrix" % interp_id)


def _mini_debug_info_libpython(interp):
    """A copy of `interp`'s libpython stripped of everything but MiniDebugInfo: its function
    symbols, xz-compressed in .gnu_debugdata (the recipe of gdb's manual, "MiniDebugInfo"),
    made once in <cache>/minidebuginfo/3.N/."""
    source = pathlib.Path(interp.libpython)
    dest_dir = cache_dir() / "minidebuginfo" / ("3.%d" % interp.minor)
    dest = dest_dir / source.name
    if dest.exists() and dest.stat().st_mtime >= source.stat().st_mtime:
        return dest
    dest_dir.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="minidebug-", dir=dest_dir))
    try:
        def sh(*cmd):
            rc, out, err = run(list(cmd), TIMEOUT)
            assert rc == 0, "%s failed: %s" % (" ".join(map(str, cmd)), err)
            return out
        dynsyms = set(l.split()[0] for l in sh("nm", "-D", "--format=posix", "--defined-only",
                                               source).splitlines() if l.split())
        funcs = set(l.split()[0] for l in sh("nm", "--format=posix", "--defined-only",
                                             source).splitlines()
                    if len(l.split()) > 1 and l.split()[1] in ("T", "t"))
        (work / "keep").write_text("\n".join(sorted(funcs - dynsyms)) + "\n")
        lib, mini = work / source.name, work / "mini"
        shutil.copyfile(source, lib)
        sh("objcopy", "--only-keep-debug", lib, mini)
        sh("objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
           "--keep-symbols=%s" % (work / "keep"), mini, mini)
        sh("strip", "--strip-all", "-R", ".comment", lib)
        sh("xz", "-f", mini)
        sh("objcopy", "--add-section", ".gnu_debugdata=%s.xz" % mini, lib)
        os.chmod(lib, 0o755)
        os.replace(lib, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def _json(cmd):
    rc, out, err = run(cmd, TIMEOUT)
    assert rc == 0, "%s failed:\n%s" % (" ".join(map(str, cmd)), err)
    return json.loads(out)


NO_JIT_IDS = tuple(i for i in INTERP_IDS if not i.endswith("-jit"))
JIT_IDS = tuple(i for i in INTERP_IDS if i.endswith("-jit"))
CEXT_IDS = tuple(i for i in INTERP_IDS if i.endswith("-cext"))


def on(ids):
    """Run a test on the processes (and cores) of these interpreters, shared by the module."""
    return pytest.mark.parametrize("mix", ids, indirect=True)


@pytest.fixture(scope="module")
def mix(request):
    interp = _interp(request.param)
    jit = request.param.endswith("-jit")
    # With the JIT on: a call from JIT code (tests/scenarios/jit_call.py).
    name, env = ("jit_call", {"PYTHON_JIT": "1"}) if jit else ("native_mix", {})
    ext_dir = None
    if request.param.endswith("-cext"):
        ext_dir = tempfile.mkdtemp(prefix="pyunwind-cext-")
        name, env = "native_cext", {"PYUNWIND_CEXT_DIR": _build_cext(interp, ext_dir)}
    try:
        yield from _mix(interp, name, env, jit)
    finally:
        if ext_dir:
            shutil.rmtree(ext_dir, ignore_errors=True)


def _build_cext(interp, directory):
    """tests/scenarios/native_cext.c built for `interp` (with -g: its lines are checked too)."""
    rc, out, err = run([interp.exe, "-c", "import sysconfig; print(sysconfig.get_paths()['include']);"
                        " print(sysconfig.get_config_var('EXT_SUFFIX'))"], TIMEOUT,
                       env=dict(os.environ, **interp.env))
    assert rc == 0, err
    include, suffix = out.split()
    src = repo_root() / "tests" / "scenarios" / "native_cext.c"
    rc, out, err = run(["gcc", "-shared", "-fPIC", "-O2", "-g", "-I", include, str(src), "-o",
                        os.path.join(directory, "pyunwind_cext" + suffix)], TIMEOUT)
    assert rc == 0, "building the C extension failed:\n%s%s" % (out, err)
    return directory


def _mix(interp, name, env, jit):
    with Scenario(interp, name, env=env) as sc:
        live = _json([cli_path(), "pid", sc.pid, "--native-all", "--json"])
        core = sc.make_core()
        yield {
            "jit": jit,
            "interp": interp,
            "sc": sc,
            "core": core,
            "live": live,
            "all": _json([cli_path(), "core", core, "--native-all", "--json"]),
            "hidden": _json([cli_path(), "core", core, "--native", "--json"]),
        }


# Call plumbing `--native` hides between two Python frames, in CPython 3.10 to 3.15's names:
# the eval loop and its entry (Python/ceval.c), vectorcall and tp_call dispatch
# (Objects/call.c, Objects/methodobject.c), method and slot trampolines (Objects/descrobject.c,
# Objects/classobject.c, Objects/typeobject.c). A class's dunder slots (`slot_mp_subscript`)
# and a generator's (`gen_iternext`) are what C code called: they stay.
PLUMBING = re.compile(r"_?PyEval_|_?PyObject_Vectorcall|_PyFunction_Vectorcall|_?PyObject_Call"
                      r"|_PyObject_MakeTpCall|cfunction_(vectorcall|call)|method_vectorcall"
                      r"|slot_tp_call$|vectorcall_(method|unbound)|type_call$|_TAIL_CALL_")


def _base(name):
    """A symbol without its version (`@GLIBC_2.2.5`) or compiler suffix (`.lto_priv.0`)."""
    return None if name is None else name.split("@")[0].split(".")[0]


def _is_interp(module):
    """Whether a module's file name is the interpreter's own (libpython or the executable)."""
    return bool(module) and bool(module.startswith("libpython3") or re.match(r"python3(\.\d+t?)?$", module))


# STOP_AFTER ([start, end) ranges) is set in front of this script: the walk ends after the
# first frame whose PC lies in one (gdb's frames older than JIT code it cannot unwind).
GDB_SCRIPT = r"""
import os
import gdb
for th in gdb.selected_inferior().threads():
    th.switch()
    print("THREAD %d" % th.ptid[1])
    f = gdb.newest_frame()
    exact = True
    while f is not None:
        # Tail-call frames gdb infers from DWARF call sites are not on the stack.
        if f.type() != gdb.TAILCALL_FRAME:
            pc = f.pc()
            sal = f.find_sal()
            where = "%s|%s" % (sal.symtab.filename if sal.symtab else "", sal.line or "")
            if f.type() == gdb.INLINE_FRAME:
                print("INLINE %s|%s" % (f.name(), where))
            else:
                look = pc if exact else pc - 1
                sym = gdb.execute("info symbol %#x" % look, to_string=True).strip()
                name = "" if sym.startswith("No symbol") else sym.split(" in section")[0].split(" + ")[0]
                lib = gdb.solib_name(pc) or gdb.current_progspace().filename or "?"
                # The name the module is loaded by (a soname link, `libffi.so.8`), and the
                # file's own (`libffi.so.8.1.2`, a core's NT_FILE name).
                real = os.path.basename(os.path.realpath(lib))
                # gdb's "system-supplied DSO" is the vDSO, which /proc/PID/maps calls [vdso].
                if " of system-supplied DSO at " in sym:
                    lib = real = "[vdso]"
                print("FRAME %#x %s %s %s|%s" % (pc, os.path.basename(lib), real, name, where))
                exact = f.type() == gdb.SIGTRAMP_FRAME
                if any(start <= pc < end for start, end in STOP_AFTER):
                    break
        try:
            f = f.older()
        except gdb.error:
            break
"""


def _gdb_frames(mix, stop_after=()):
    """Plain gdb's raw frames (neither pyunwind's unwinder nor any frame filter; tail-call
    frames left out) of every thread: {lwp: [(pc, minimal-symbol name or None, module,
    inlined, file, line, module file)]}, `inlined` being the [(function, file, line)] gdb
    shows inlined at that PC, innermost first, `module` the name the module was loaded by and
    `module file` the name of the file that name leads to (links followed); a thread's walk
    ends after its first frame in `stop_after`."""
    interp = mix["interp"]
    script = os.path.join(mix["sc"].tmpdir, "frames.py")
    with open(script, "w") as f:
        f.write("STOP_AFTER = %r\n" % (list(stop_after),) + GDB_SCRIPT)
    cmd = [*gdb_argv(), "-nx", "-batch", "-iex", "set debuginfod enabled off"]
    if interp.debug_dir:
        cmd += ["-iex", "set debug-file-directory %s" % interp.debug_dir]
    cmd += ["-ex", "source %s" % script, interp.exe, mix["core"]]
    env = dict(os.environ, **interp.env)
    rc, out, err = run(cmd, TIMEOUT, env=env)
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    threads = parse_gdb_frames(out)
    assert threads, "gdb printed no frames:\n%s\n%s" % (out, err)
    return threads


def parse_gdb_frames(out):
    """GDB_SCRIPT's output: {lwp: [(pc, minimal-symbol name or None, module, inlined, file,
    line, module file)]} (see _gdb_frames)."""
    threads, cur, inlined = {}, None, []
    for line in out.splitlines():
        if line.startswith("THREAD "):
            cur, inlined = threads.setdefault(int(line.split()[1]), []), []
        elif line.startswith("INLINE "):
            name, file, num = line[len("INLINE "):].rsplit("|", 2)
            inlined.append((name, file or None, int(num) if num else None))
        elif line.startswith("FRAME ") and cur is not None:
            _, pc, lib, real, rest = line.split(" ", 4)
            name, file, num = rest.rsplit("|", 2)
            cur.append((int(pc, 16), name or None, lib, inlined, file or None,
                        int(num) if num else None, real))
            inlined = []
    return threads


def _basename(path):
    return None if path is None else os.path.basename(path)


def check_native_frames_match_gdb(threads, gdb, jit_code, cut_at_jit):
    """The report's `threads` (of `--native-all`) against `gdb` (_gdb_frames: plain gdb's
    frames of every thread): the same threads; every native PC we report is gdb's, in gdb's
    order; the frames we leave out are the eval-loop frames our Python runs replace (one per
    run, all in the interpreter); each frame's module is gdb's (by the name it was loaded by
    or its file's), its name the symbol gdb finds at that address (none where gdb finds
    none), its file and line gdb's (none where gdb has no DWARF there), and the functions
    DWARF says are inlined at that PC gdb's, in order. A
    frame is JIT code (kind "jit", named `[jit] ...` or `[trampoline] ...`) exactly when its
    PC is in `jit_code`; with `cut_at_jit` (gdb was stopped after its first frame in
    `jit_code`), a thread is compared up to its first JIT frame. Returns how many JIT frames
    the threads have."""
    ids = sorted(t["native_id"] for t in threads)
    assert ids == sorted(gdb), "threads: ours %s, gdb's %s" % (ids, sorted(gdb))
    jit_frames = 0
    for t in threads:
        frames = t["frames"]
        assert not [f for f in frames if f["kind"] == "unreadable"], frames
        for f in frames:
            if f["kind"] in ("native", "jit"):
                assert (f["kind"] == "jit") == jh.in_ranges(jit_code, f["address"]), (
                    hex(f["address"]), f, [(hex(a), hex(b)) for a, b in jit_code])
        kinds = [f["kind"] for f in frames]
        jit_frames += kinds.count("jit")
        if cut_at_jit and "jit" in kinds:
            frames = frames[:kinds.index("jit") + 1]
        ours, inl = [], []
        for f in frames:
            if f["kind"] == "native" and f.get("inlined"):
                inl.append(f)
            elif f["kind"] in ("native", "jit"):
                ours.append((f, inl))
                inl = []
        theirs = gdb[t["native_id"]]
        pcs = [x[0] for x in theirs]
        k = 0
        skipped = []
        for f, inlined in ours:
            while k < len(pcs) and pcs[k] != f["address"]:
                skipped.append(theirs[k])
                k += 1
            assert k < len(pcs), "thread %d: native frame %#x (%s) not in gdb's stack %s" % (
                t["native_id"], f["address"], f.get("function"), [hex(p) for p in pcs])
            pc, name, lib, g_inlined, g_file, g_line, real = theirs[k]
            if f["kind"] == "jit":
                # gdb names no 3.14 JIT code and no perf trampoline, and all of 3.15's
                # `py::jit:executor` (the name CPython registers); ours names the code the
                # executor or trampoline runs (test_jit_frames, test_jit.py).
                assert f["function"].startswith(("[jit] ", "[trampoline] ")), (hex(pc), f, name)
            else:
                # The module by either of its names: a core's NT_FILE names the file, the
                # dynamic linker's list (all an arm64 qemu core has) the name it was loaded by.
                assert f.get("module") in (lib, real), (hex(pc), f, theirs[k])
                assert _base(f.get("function")) == _base(name), (hex(pc), f, theirs[k])
            assert (_basename(f.get("file")), f.get("line")) == (_basename(g_file), g_line), (
                hex(pc), f, theirs[k])
            assert [(i["function"], _basename(i.get("file")), i.get("line")) for i in inlined] == [
                (n, _basename(fl), ln) for n, fl, ln in g_inlined], (hex(pc), inlined, g_inlined)
            k += 1
        assert k == len(pcs), "thread %d: gdb has older frames: %s" % (t["native_id"], theirs[k:])
        runs = sum(1 for f in frames if f["kind"] == "python" and f["entry"])
        assert len(skipped) == runs, "thread %d: skipped %s\nours %s\ngdb %s" % (
            t["native_id"], _fmt([x[:3] for x in skipped]),
            _fmt([(f["address"], f.get("function"), f.get("module")) for f, _ in ours]),
            _fmt([x[:3] for x in theirs]))
        assert all(_is_interp(x[2]) for x in skipped), skipped
    return jit_frames


@on(INTERP_IDS)
def test_native_frames_match_gdb(mix):
    """check_native_frames_match_gdb against plain gdb's unwinding of the core. The JIT frames
    are checked without pyunwind: a frame is JIT code exactly when its PC lies in an anonymous
    executable mapping of the live process (no perf trampolines in jit_call.py), and plain gdb
    reaches it through the C frames' own CFI. Older frames are compared with gdb only where
    gdb unwinds JIT code itself (GDB_UNWINDS_JIT_FROM_MINOR); on 3.14 nothing independent of
    pyunwind unwinds it (gdb's bt through it is pyunwind's own unwinder, test_jit.py), so the
    comparison ends at the first JIT frame."""
    jit_code = jh.anon_exec_ranges(mix["sc"].pid) if mix["jit"] else []
    cut_at_jit = mix["jit"] and mix["interp"].minor < GDB_UNWINDS_JIT_FROM_MINOR
    gdb = _gdb_frames(mix, jit_code if cut_at_jit else ())
    jit_frames = check_native_frames_match_gdb(mix["all"]["threads"], gdb, jit_code, cut_at_jit)
    assert bool(jit_frames) == mix["jit"], mix["all"]["threads"]


def _fmt(frames):
    return "\n  ".join([""] + ["%#x %s %s" % f for f in frames])


def _project(frames):
    """Python frames as (file, line) and native frames outside the interpreter as their
    symbol (None when unnamed), innermost first; inlined functions left out (pystack's
    too)."""
    out = []
    for f in frames:
        if f["kind"] == "python":
            out.append(("py", os.path.basename(f["file"]), f["line"]))
        elif f["kind"] == "native" and not f.get("inlined") and not _is_interp(f.get("module")):
            out.append(("c", _base(f.get("function"))))
    return out


def _pystack_threads(cmd):
    rc, out, err = run(cmd, TIMEOUT)
    assert rc == 0, "pystack failed:\n%s\n%s" % (out, err)
    threads, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"Traceback for thread (\d+)", line)
        if m:
            assert int(m.group(1)) not in threads, "thread %s twice:\n%s" % (m.group(1), out)
            cur = threads[int(m.group(1))] = []
            continue
        m = re.match(r'\s+\(Python\) File "([^"]*)", line (\d+), in ', line)
        if m and cur is not None:
            cur.append(("py", os.path.basename(m.group(1)), int(m.group(2))))
            continue
        m = re.match(r'\s+\(C\) File "[^"]*", line \d+, in (\S+)( \(inlined\))? \((.*)\)$', line)
        if m and cur is not None and not m.group(2):
            cur.append(("c", _base(m.group(1)), os.path.basename(m.group(3))))
    for k in threads:
        threads[k].reverse()
    return threads


def _same_placement(ours, theirs):
    theirs = [t[:2] if t[0] == "c" else t for t in theirs
              if t[0] == "py" or not _is_interp(t[2])]
    assert len(ours) == len(theirs), "\nours:   %s\npystack: %s" % (ours, theirs)
    for a, b in zip(ours, theirs):
        if a[0] == "c" and (a[1] is None or b[1] == "???"):
            assert b[0] == "c", (ours, theirs)
        elif a[0] == "c":
            # Aliases (`__clone3`, `clone3`): names are checked against gdb's elsewhere.
            assert b[0] == "c" and a[1].lstrip("_") == b[1].lstrip("_"), (ours, theirs)
        else:
            assert a == b, "\nours:   %s\npystack: %s" % (ours, theirs)


@on(PYSTACK_IDS)
@pytest.mark.parametrize("where", ["core", "live"])
def test_placement_matches_pystack(mix, where):
    """The Python frames sit among the native frames outside the interpreter (libc, libffi,
    _ctypes) where pystack --native puts them, thread by thread."""
    assert os.access(PYSTACK, os.X_OK), "pystack missing from the test venv (tools/test-env.sh)"
    if where == "core":
        theirs = _pystack_threads([PYSTACK, "core", mix["core"], mix["interp"].exe, "--native-all"])
        report = mix["all"]
    else:
        theirs = _pystack_threads([PYSTACK, "remote", mix["sc"].pid, "--native-all"])
        report = mix["live"]
    check_placement_matches_pystack(report, theirs)


def check_placement_matches_pystack(report, theirs):
    """The report's threads are pystack's (`theirs`: _pystack_threads), and in each, the
    Python frames sit among the native frames outside the interpreter where pystack puts
    them."""
    ids = sorted(t["native_id"] for t in report["threads"])
    assert ids == sorted(theirs), "threads: ours %s, pystack's %s" % (ids, sorted(theirs))
    for t in report["threads"]:
        _same_placement(_project(t["frames"]), theirs[t["native_id"]])


def broken_copies(threads):
    """Copies of a report's `threads`, each broken one way a reader could break it: each
    thread dropped in turn; and in the first thread with a native frame: that frame's line
    moved to the next (or a file and line given, where it had none), its function renamed,
    its module renamed, the frame dropped, an inlined function dropped (or one added, where
    there was none)."""
    out = []
    for i in range(len(threads)):
        out.append(copy.deepcopy(threads[:i] + threads[i + 1:]))

    def first(pred):
        broken = copy.deepcopy(threads)
        for t in broken:
            for k, f in enumerate(t["frames"]):
                if pred(f):
                    return broken, t["frames"], k
        return None, None, None

    native = lambda f: f["kind"] == "native" and not f.get("inlined")
    broken, frames, k = first(lambda f: native(f) and f.get("line"))
    if broken is None:
        broken, frames, k = first(native)
        frames[k].update(file="invented.c", line=0)
    frames[k]["line"] += 1
    out.append(broken)
    broken, frames, k = first(native)
    frames[k]["function"] = str(frames[k].get("function")) + "_"
    out.append(broken)
    broken, frames, k = first(native)
    frames[k]["module"] = "lib-" + str(frames[k].get("module"))
    out.append(broken)
    broken, frames, k = first(native)
    del frames[k]
    out.append(broken)
    broken, frames, k = first(lambda f: f["kind"] == "native" and f.get("inlined"))
    if broken is None:
        broken, frames, k = first(native)
        frames.insert(k, dict(frames[k], function="invented", inlined=True))
    else:
        del frames[k]
    out.append(broken)
    return out


@on(["pyenv-3.12"])
def test_checks_fail_on_broken_reports(mix):
    """check_native_frames_match_gdb and check_placement_matches_pystack pass on the core's
    report, and fail on each of its broken_copies (the placement check compares no lines,
    names of interpreter frames or inlined frames: it is given the thread drops, and a
    Python frame's line moved)."""
    threads = mix["all"]["threads"]
    gdb = _gdb_frames(mix)
    check_native_frames_match_gdb(threads, gdb, [], False)
    for broken in broken_copies(threads):
        with pytest.raises(AssertionError):
            check_native_frames_match_gdb(broken, gdb, [], False)
    theirs = _pystack_threads([PYSTACK, "core", mix["core"], mix["interp"].exe, "--native-all"])
    check_placement_matches_pystack(mix["all"], theirs)
    brokens = [dict(mix["all"], threads=b) for b in broken_copies(threads)[:len(threads)]]
    moved = copy.deepcopy(mix["all"])
    next(f for f in moved["threads"][0]["frames"] if f["kind"] == "python")["line"] += 1
    for broken in brokens + [moved]:
        with pytest.raises(AssertionError):
            check_placement_matches_pystack(broken, theirs)


@on(INTERP_IDS)
def test_live_matches_core(mix):
    """The process does not move: live and core give the same frames; each thread's stop is
    measured."""
    strip = lambda fr: [(f["kind"], f.get("function"), f.get("line"), f.get("address"))
                        for f in fr]
    live = {t["native_id"]: strip(t["frames"]) for t in mix["live"]["threads"]}
    core = {t["native_id"]: strip(t["frames"]) for t in mix["all"]["threads"]}
    assert live == core
    stops = mix["live"]["native_stops"]
    assert sorted(s["native_id"] for s in stops) == sorted(
        int(t) for t in os.listdir("/proc/%d/task" % mix["sc"].pid))
    assert all(t["native_id"] is not None for t in mix["live"]["threads"])


# What gdb's `bt` shows, through its frame filters (pyunwind's among them): `PY` for a
# Python frame, `C pc` for a native frame that is on the stack (not an inlined call, not a
# tail call gdb infers).
FILTERED_SCRIPT = r'''
import gdb
import gdb.frames
def show(d):
    f = d.inferior_frame()
    if str(d.filename() or "").endswith(".py"):
        print("PY")
    elif f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
        print("C %#x" % f.pc())
    for e in d.elided() or []:
        show(e)
for d in gdb.frames.execute_frame_filters(gdb.newest_frame(), 0, -1) or []:
    show(d)
'''


@on(NO_JIT_IDS)
def test_gdb_frame_filter_hides_the_same_frames(mix):
    """gdb's `bt` with pyunwind's frame filter shows, between the outermost and innermost
    Python frame, the native frames `--native` shows there: the plumbing is hidden by the
    same rule, by address, with and without symbols."""
    interp = mix["interp"]
    script = os.path.join(mix["sc"].tmpdir, "filtered.py")
    with open(script, "w") as f:
        f.write(FILTERED_SCRIPT)
    cmd = [*gdb_argv(), "-nx", "-batch", "-iex", "set debuginfod enabled off", "-x",
           str(repo_root() / "gdb-scripts" / "pyunwind-gdb.py"), "-ex", "source %s" % script,
           interp.exe, mix["core"]]
    rc, out, err = run(cmd, TIMEOUT, env=dict(os.environ, **interp.env))
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    lines = [l.split() for l in out.splitlines() if l == "PY" or l.startswith("C ")]
    py = [i for i, l in enumerate(lines) if l[0] == "PY"]
    assert len(py) >= 2, out + err
    shown = [int(l[1], 16) for l in lines[py[0]:py[-1]] if l[0] == "C"]
    t = mix["hidden"]["threads"][0]
    kinds = [f["kind"] for f in t["frames"]]
    first, last = kinds.index("python"), len(kinds) - 1 - kinds[::-1].index("python")
    ours = [f["address"] for f in t["frames"][first:last]
            if f["kind"] == "native" and not f.get("inlined")]
    assert shown == ours, "gdb: %s\nours: %s" % ([hex(a) for a in shown], [hex(a) for a in ours])


@on(JIT_IDS)
def test_jit_frames(mix):
    """With the JIT on, the JIT frame is unwound and named after its executor's code, and
    sits directly above the Python frame that runs it."""
    t = mix["all"]["threads"][0]
    kinds = [f["kind"] for f in t["frames"]]
    assert kinds.count("jit") == 1, t["frames"]
    j = kinds.index("jit")
    with open(mix["sc"].script, encoding="utf-8") as f:
        first = 1 + next(i for i, text in enumerate(f) if text.startswith("def leaf("))
    assert t["frames"][j]["function"] == "[jit] leaf (%s:%d)" % (mix["sc"].script, first)
    assert kinds[j + 1] == "python" and t["frames"][j + 1]["function"] == "leaf"


@on(INTERP_IDS)
def test_python_frames_and_truth(mix):
    """--native and --native-all list exactly the truth's threads, each with the truth's Python
    frames in order; --native hides the interpreter's call plumbing between two Python frames
    and keeps the C functions doing the work (stripped builds: the builtin a Python frame
    calls, named from its PyMethodDef)."""
    truth = mix["sc"].truth["threads"]
    # A thread the truth leaves out would go unchecked: the truth must cover the process.
    assert sorted(t["native_id"] for t in truth) == sorted(
        int(t) for t in os.listdir("/proc/%d/task" % mix["sc"].pid)), (
        "the scenario's truth does not record every thread of the process", truth)
    want = {t["native_id"]: [(f["function"], f["file"], f["line"]) for f in t["frames"]]
            for t in truth}
    for which in ("hidden", "all"):
        ids = [t["native_id"] for t in mix[which]["threads"]]
        assert sorted(ids) == sorted(want), (which, ids, sorted(want))
        for t in mix[which]["threads"]:
            got = [(f["function"], f["file"], f["line"]) for f in t["frames"] if f["kind"] == "python"]
            assert got == want[t["native_id"]], (which, t["native_id"], got)
    assert_no_plumbing_between_python(mix["hidden"]["threads"])


def assert_no_plumbing_between_python(threads):
    """Between a thread's first and last Python frame, the interpreter's frames left are the C
    functions doing the work: named (without symbols: the builtin a Python frame calls, from
    its PyMethodDef), and none of them call plumbing."""
    for t in threads:
        kinds = [f["kind"] for f in t["frames"]]
        first = kinds.index("python")
        last = len(kinds) - 1 - kinds[::-1].index("python")
        for f in t["frames"][first:last]:
            if f["kind"] == "native" and _is_interp(f.get("module")):
                name = f.get("function")
                assert name is not None and not PLUMBING.match(name), (f, t["frames"])


@on(CEXT_IDS)
def test_c_extension_frame_between_python_frames(mix):
    """The extension's own frame (named from its symbols, with its DWARF line) sits between
    the Python frame it calls back and the one that called it, also with the plumbing hidden."""
    for report in (mix["hidden"], mix["all"]):
        frames = report["threads"][0]["frames"]
        names = [(f["kind"], f.get("function")) for f in frames]
        i = names.index(("python", "callback"))
        j = names.index(("python", "through_c"))
        between = [f for f in frames[i + 1:j] if f["kind"] == "native"
                   and f.get("module", "").startswith("pyunwind_cext")]
        assert [f["function"] for f in between if not f.get("inlined")][:1] == ["cext_call_back"], frames
        assert between[0]["file"].endswith("native_cext.c") and between[0]["line"] > 0


@on(["pyenv-3.12-minidebuginfo"])
def test_mini_debug_info_names_local_functions(mix):
    """A libpython stripped to MiniDebugInfo: its static functions are named (gdb's names
    are checked frame by frame in test_native_frames_match_gdb)."""
    frames = [f for t in mix["all"]["threads"] for f in t["frames"]
              if f["kind"] == "native" and f.get("module", "").startswith("libpython")]
    assert frames and all("function" in f for f in frames), frames
    assert "acquire_timed" in [f["function"] for f in frames]


@on(["pyenv-3.13"])
def test_ptrace_refused_is_one_line(mix):
    """A process another tracer holds (strace here) cannot be stopped: `pid --native` refuses
    with one line and exit status 1; the process is left as it was."""
    pid = mix["sc"].pid
    tracer = subprocess.Popen(["strace", "-o", os.devnull, "-p", str(pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open("/proc/%d/status" % pid) as f:
                if any(l.startswith("TracerPid:") and l.split()[1] != "0" for l in f):
                    break
            time.sleep(0.01)
        else:
            raise AssertionError("strace did not attach")
        rc, out, err = run([cli_path(), "pid", pid, "--native"], TIMEOUT)
    finally:
        tracer.terminate()
        tracer.wait(10)
    assert rc == 1 and not out, (rc, out, err)
    assert err.count("\n") == 1 and err.startswith("pyunwind: cannot ptrace process %d" % pid), err
    assert _json([cli_path(), "pid", pid, "--json"])["threads"]


@on(["pyenv-3.12-stripped"])
def test_unwinding_failure_keeps_python_frames(mix, tmp_path):
    """A thread whose registers are nonsense (NT_PRSTATUS rip, rsp and rbp zeroed) gets one
    error entry, and all its Python frames."""
    core = tmp_path / "core"
    shutil.copy(mix["core"], core)
    main = mix["sc"].pid
    with open(core, "r+b") as f:
        data = f.read()
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phnum, = struct.unpack_from("<H", data, 0x38)
        for i in range(phnum):
            p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + 56 * i)
            if p_type != 4:
                continue
            off, end = p_offset, p_offset + p_filesz
            while off + 12 <= end:
                namesz, descsz, ntype = struct.unpack_from("<III", data, off)
                desc = off + 12 + (namesz + 3) // 4 * 4
                if ntype == 1 and struct.unpack_from("<I", data, desc + 32)[0] == main:
                    for reg in (4, 16, 19):  # rbp, rip, rsp in user_regs_struct
                        f.seek(desc + 112 + 8 * reg)
                        f.write(b"\0" * 8)
                off = desc + (descsz + 3) // 4 * 4
    r = _json([cli_path(), "core", core, "--native", "--json"])
    t = next(x for x in r["threads"] if x["native_id"] == main)
    bad = [f for f in t["frames"] if f["kind"] == "unreadable"]
    assert len(bad) == 1 and "native frames" in bad[0]["reason"], t["frames"]
    want = [(f["function"], f["line"]) for f in mix["sc"].truth["threads"][0]["frames"]]
    assert [(f["function"], f["line"]) for f in t["frames"] if f["kind"] == "python"] == want


@pytest.mark.parametrize("interp_id", ["pyenv-3.12", "debian-3.11"])
def test_a_thread_stopped_in_the_vdso(interp_id):
    """tests/scenarios/vdso_clock.py's "clock" thread asks for its CPU time in a loop: stopped,
    it is nearly always in the vDSO's `clock_gettime` (the kernel's image, no file). From a
    core in which it is (the first of ten), its native frames are plain gdb's, each one, the
    innermost `clock_gettime` in `[vdso]` then the C library's; its Python frames follow,
    innermost `clock` at its line. Live, the same, from the first read that stops it there.

    "In which it is" is the kernel's record: the thread is in the vDSO and in the system call
    `clock_gettime(CLOCK_THREAD_CPUTIME_ID, ...)` that `time.thread_time()` makes there. The
    vDSO alone is not enough: CI caught a core with the thread in the same vDSO function at its
    loop's line 19, most likely reading CLOCK_MONOTONIC (no system call) for the timed wait of
    a thread that gave up the GIL at its loop's jump and takes it back."""
    interp = _interp(interp_id)
    with Scenario(interp, "vdso_clock") as sc:
        maps = pathlib.Path("/proc/%d/maps" % sc.pid).read_text().splitlines()
        line = next(l for l in maps if l.endswith(" [vdso]"))
        start, end = (int(x, 16) for x in line.split()[0].split("-"))
        tid = next(t["native_id"] for t in sc.truth["threads"] if t["name"] == "clock")

        def in_vdso(report):
            t = next(t for t in report["threads"] if t["native_id"] == tid)
            return start <= t["frames"][0].get("address", 0) < end

        def clock_in_vdso(core, report):
            return in_vdso(report) and CoreFile(core).system_calls()[tid] == (
                SYS_CLOCK_GETTIME, CLOCK_THREAD_CPUTIME_ID)

        def check(report):
            t = next(t for t in report["threads"] if t["native_id"] == tid)
            frames = t["frames"]
            assert [(f.get("function"), f.get("module")) for f in frames[:2]] == [
                ("clock_gettime", "[vdso]"), ("clock_gettime", "libc.so.6")], frames[:3]
            assert not [f for f in frames if f["kind"] == "unreadable"], frames
            py = [f for f in frames if f["kind"] == "python"]
            assert (py[0]["function"], py[0]["line"]) == ("clock", sc.truth["clock_line"]), py
            assert [f["function"] for f in py[1:]] == ["Thread.run", "Thread._bootstrap_inner",
                                                       "Thread._bootstrap"], py

        for attempt in range(10):
            core = sc.make_core_named("vdso%d" % attempt)
            report = _json([cli_path(), "core", core, "--native-all", "--json"])
            if clock_in_vdso(core, report):
                break
        else:
            pytest.fail("ten cores and never was the clock thread stopped in the vDSO")
        check(report)
        check_native_frames_match_gdb(report["threads"], _gdb_frames(
            {"interp": interp, "sc": sc, "core": core}), [], False)
        for attempt in range(10):
            # Stopped (SIGSTOP) for the read, so that /proc's record of the system call is
            # the one of the read.
            os.kill(sc.pid, signal.SIGSTOP)
            try:
                deadline = time.monotonic() + TIMEOUT
                while not all_stopped(sc.pid, [tid]):
                    assert time.monotonic() < deadline, "the scenario does not stop"
                    time.sleep(0.01)
                with open("/proc/%d/task/%d/syscall" % (sc.pid, tid), encoding="ascii") as f:
                    kernel = f.read().split()[:2]
                report = _json([cli_path(), "pid", sc.pid, "--native", "--json"])
            finally:
                os.kill(sc.pid, signal.SIGCONT)
            if (in_vdso(report) and kernel == [str(SYS_CLOCK_GETTIME),
                                               hex(CLOCK_THREAD_CPUTIME_ID)]):
                break
        else:
            pytest.fail("ten reads and never was the clock thread stopped in the vDSO")
        check(report)
