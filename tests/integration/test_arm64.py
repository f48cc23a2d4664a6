"""arm64 (aarch64) cores: Debian's own arm64 interpreters (bookworm's python3.11, sid's python3.14
and python3.15; tools/arm64.sh) run under qemu-user, stopped at their known point and dumped by
qemu itself (arm64_harness: SIGABRT, `qemu_<prog>_<date>-<time>_<pid>.core`), then read with
`pyunwind core CORE --sysroot ROOT`, ROOT being the root the interpreter ran in.

What such a core holds (qemu 7.2): NT_PRSTATUS per thread, NT_PRPSINFO, NT_AUXV; no NT_FILE
(the modules come from the auxv and the dynamic linker's r_debug/link_map), no NT_SIGINFO, no
NT_ARM_PAC_MASK, and no bytes for the executable ELF-headed mappings (text, read-only data and
CFI come from the files under ROOT). sid's builds sign their return addresses (PAC).

Checked against each scenario's truth, exactly: every thread and its Python frames (function,
file, line) in the JSON, the text and the --native reports; the locals scenario's locals; an
asyncio task graph; the crash (the core's first NT_PRSTATUS: SIGABRT, that thread); with
PYTHON_JIT=1 on sid, the JIT frame; with -X perf (sid 3.14, 3.15) and -X perf_jit (sid 3.14),
each perf trampoline frame, named after the function it starts, and perf_jit's jitdump naming
the same code; gdb-multiarch with pyunwind's script on the JIT and perf stops. Native frames
are checked against gdb-multiarch's own unwinding of the same core, given the PAC mask a kernel
core would carry (an NT_ARM_PAC_MASK note after each NT_PRSTATUS, in a copy of the core: gdb
cannot unwind sid's signed return addresses without it); pyunwind reads that copy as it reads
the original. They are compared by module, name, file, line and inlined functions; the
roots' packages are stripped, so file, line and inlined functions come only from the dwarf
stops' C library (tests/scenarios/native_dwarf.c, built here for arm64 with -g and called
through ctypes).

One core per (interpreter, scenario), made once for the module (module-scoped fixture). A
missing root, qemu or gdb-multiarch fails the tests (make arm64); nothing is skipped.
"""

import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import tempfile

import pytest

import arm64_harness
import harness
from jit_harness import in_ranges
from test_asyncio import check_async
from test_native import (GDB_SCRIPT, GDB_UNWINDS_JIT_FROM_MINOR, assert_no_plumbing_between_python,
                         broken_copies, check_native_frames_match_gdb, parse_gdb_frames)
from test_stacks import check_report, expected, expected_locals, traceback_frames

CLI_TIMEOUT = 120
GDB_TIMEOUT = 300
SCENARIOS = ["recursion", "threads", "locals"]
# A C library with DWARF (tests/scenarios/native_dwarf.c), built for arm64 by Debian's cross
# compiler (`make arm64` installs it), called through ctypes: the one frame of these stops
# with a file, a line and an inlined function (the roots' own packages are stripped).
DWARF_LIB = "libnative_dwarf.so"
CROSS_CC = "aarch64-linux-gnu-gcc"
# One asyncio case (tests/scenarios/asyncio/cases.py), with the C Task: a task group.
ASYNC_CASE = ("taskgroup", "c")
ASYNC_SCRIPT = harness.repo_root() / "tests" / "scenarios" / "asyncio" / "cases.py"
INTERP_IDS = [i for i, _, _ in arm64_harness.ARM64_INTERPRETERS]
JIT_IDS = [i for i, _, minor in arm64_harness.ARM64_INTERPRETERS if minor >= 14]

# Python calls through perf trampolines (tests/scenarios/perf_calls.py): the stop kind -> the
# variable that turns them on (-X perf, -X perf_jit).
PERF_ENV = {"perf": "PYTHONPERFSUPPORT", "perf_jit": "PYTHON_PERF_JIT_SUPPORT"}
# A stop: "<interpreter id>:<scenario>", "<interpreter id>:asyncio", "<interpreter id>:jit",
# "<interpreter id>:perf" or "<interpreter id>:perf_jit". -X perf on both sid interpreters;
# -X perf_jit (the same trampolines, padded, plus a jitdump) on 3.14 only.
STOPS = ["%s:%s" % (i, s) for i in INTERP_IDS for s in SCENARIOS + ["asyncio", "dwarf"]] + \
    ["%s:jit" % i for i in JIT_IDS] + ["%s:perf" % i for i in JIT_IDS] + \
    ["arm64-sid-3.14:perf_jit"]
# why_state (threads blocked in different system calls) is checked by test_why_state only.
WHY_STOPS = ["%s:why_state" % i for i in INTERP_IDS]
# What a why_state thread does -> (its state, its system call) on arm64, where glibc makes
# `ppoll` of poll, `epoll_pwait` of epoll_wait and `clock_nanosleep` of time.sleep (3.11+).
# qemu-user cores have no NT_ARM_SYSTEM_CALL: the call is told from `svc #0` at the pc and x8.
DOING = {
    "read": ("syscall", "read"),
    "sleep": ("syscall", "clock_nanosleep"),
    "recv": ("syscall", "recvfrom"),
    "poll": ("syscall", "ppoll"),
    "lock": ("syscall", "futex"),
    "loop": ("loop_idle", "epoll_pwait"),
}
# `bits 54..48`: the user PAC mask of a 48-bit-VA arm64 kernel (data and instruction keys).
PAC_MASK = ((1 << 55) - 1) & ~((1 << 48) - 1)
NT_ARM_PAC_MASK = 0x406


def stops(kind=None):
    return [s for s in STOPS if kind is None or s.endswith(":" + kind)]


def on(ids):
    """Run a test on these stops' cores, made once for the module."""
    return pytest.mark.parametrize("stop", ids, indirect=True)


class Stop:
    def __init__(self, interp, sc, core, kind, lib_dir=None):
        self.interp, self.sc, self.core, self.kind = interp, sc, core, kind
        # Where the dwarf stop's library is (its guest loaded it from this host path).
        self.lib_dir = lib_dir
        self.truth = sc.truth
        self.root = interp.root
        self._pac_core = None
        # What the guest wrote for perf, read before the fixture deletes it: -X perf's perf map
        # (text), -X perf_jit's jitdump (bytes).
        self.perf_map = None
        self.jitdump = None
        # gdb_frames(stop, stop_after), by stop_after: one gdb-multiarch run each.
        self.gdb_frames = {}

    def cli(self, *args, core=None):
        """`pyunwind core CORE --sysroot ROOT ARGS...`: its stdout (exit status 0)."""
        cmd = [harness.cli_path(), "core", core or self.core, "--sysroot", self.root, *args]
        rc, out, err = harness.run(cmd, CLI_TIMEOUT)
        assert rc == 0, "%s failed (%d):\n%s" % (" ".join(map(str, cmd)), rc, err)
        return out

    def cli_json(self, *args, core=None):
        return json.loads(self.cli(*args, "--json", core=core))

    def pac_core(self):
        """A copy of the core with an NT_ARM_PAC_MASK note after each NT_PRSTATUS note, as a
        kernel core of a process on a PAuth CPU has (the mask of a 48-bit VA)."""
        if self._pac_core is None:
            path = self.sc.tmpdir / "pac-mask.core"
            add_pac_mask_notes(self.core, path)
            self._pac_core = str(path)
        return self._pac_core


@pytest.fixture(scope="module")
def stop(request):
    interp_id, kind = request.param.split(":")
    interp = arm64_harness.pick(interp_id)
    lib_dir = None
    if kind == "dwarf":
        lib_dir = pathlib.Path(tempfile.mkdtemp(prefix="pyunwind-dwarf-"))
        try:
            build_dwarf_lib(lib_dir / DWARF_LIB)
            sc = arm64_harness.Scenario(interp, "native_dwarf",
                                        env={"PYUNWIND_DWARF_LIB": str(lib_dir / DWARF_LIB)})
        except BaseException:
            shutil.rmtree(lib_dir, ignore_errors=True)
            raise
    elif kind == "asyncio":
        case, impl = ASYNC_CASE
        sc = arm64_harness.Scenario(interp, "asyncio-" + case, script=ASYNC_SCRIPT,
                                    args=(case, impl))
    elif kind == "why_state":
        sc = arm64_harness.Scenario(interp, "why_state")
    elif kind == "jit":
        # A call from JIT code (tests/scenarios/jit_call.py).
        sc = arm64_harness.Scenario(interp, "jit_call", env={"PYTHON_JIT": "1"})
    elif kind in PERF_ENV:
        sc = arm64_harness.Scenario(interp, "perf_calls", env={PERF_ENV[kind]: "1"})
    else:
        sc = arm64_harness.Scenario(interp, kind)
    # -X perf writes perf's map to /tmp/perf-<getpid()>.map, -X perf_jit its jitdump to
    # /tmp/jit-<getpid()>.dump: the guest's pid is qemu's.
    perf_map = pathlib.Path("/tmp/perf-%d.map" % sc.pid)
    jitdump = pathlib.Path("/tmp/jit-%d.dump" % sc.pid)
    try:
        core = sc.make_core()
        st = Stop(interp, sc, core, kind, lib_dir)
        if kind == "perf":
            st.perf_map = perf_map.read_text()
        elif kind == "perf_jit":
            st.jitdump = jitdump.read_bytes()
        yield st
    finally:
        sc.close()
        if kind in PERF_ENV:
            perf_map.unlink(missing_ok=True)
            jitdump.unlink(missing_ok=True)
        if lib_dir:
            shutil.rmtree(lib_dir, ignore_errors=True)


def build_dwarf_lib(path):
    """tests/scenarios/native_dwarf.c built for arm64 at `path`, with DWARF (-g) and CFI."""
    cc = shutil.which(CROSS_CC)
    assert cc, "%s is missing (`make arm64`: tools/arm64.sh installs it)" % CROSS_CC
    src = harness.repo_root() / "tests" / "scenarios" / "native_dwarf.c"
    rc, out, err = harness.run([cc, "-shared", "-fPIC", "-O2", "-g", "-fasynchronous-unwind-tables",
                                str(src), "-o", str(path)], CLI_TIMEOUT)
    assert rc == 0, "building %s failed:\n%s%s" % (path, out, err)


def add_pac_mask_notes(src, dst):
    """Copy core ``src`` to ``dst`` with an NT_ARM_PAC_MASK note (owner LINUX, {data_mask,
    insn_mask}) after each NT_PRSTATUS note (BFD ties a register note to the thread of the
    NT_PRSTATUS before it): the notes are rewritten at the end of the file and the PT_NOTE
    program header pointed at them."""
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        head = f.read(64)
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        notes = [i for i in range(phnum) if struct.unpack_from("<I", table, i * phentsize)[0] == 4]
        assert len(notes) == 1, "%s: %d PT_NOTE segments" % (src, len(notes))
        at = notes[0] * phentsize
        _, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", table, at)
        f.seek(p_offset)
        blob = f.read(p_filesz)
        pac = struct.pack("<III", 6, 16, NT_ARM_PAC_MASK) + b"LINUX\0\0\0" + \
            struct.pack("<QQ", PAC_MASK, PAC_MASK)
        out, off = b"", 0
        while off + 12 <= len(blob):
            namesz, descsz, ntype = struct.unpack_from("<III", blob, off)
            end = off + 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
            out += blob[off:end]
            if ntype == arm64_harness.NT_PRSTATUS:
                out += pac
            off = end
        new = (f.seek(0, os.SEEK_END) + 7) // 8 * 8
        f.seek(new)
        f.write(out)
        f.seek(phoff + at + 8)
        f.write(struct.pack("<Q", new))  # p_offset
        f.seek(phoff + at + 32)
        f.write(struct.pack("<Q", len(out)))  # p_filesz


# --- the core itself -------------------------------------------------------------------------


@on(stops())
def test_guest_core(stop):
    """The core is qemu's arm64 core of the scenario: EM_AARCH64, a thread note per thread of
    the truth, and none of the notes a kernel core adds (so the tests below read the modules
    from the auxv and r_debug, not NT_FILE)."""
    notes = arm64_harness.read_core_notes(stop.core)
    assert notes.machine == arm64_harness.EM_AARCH64
    assert sorted(notes.threads) == sorted(t["native_id"] for t in stop.truth["threads"])
    assert arm64_harness.NT_FILE not in notes.types
    assert NT_ARM_PAC_MASK not in notes.types
    assert stop.truth["executable"] == stop.interp.guest_exe
    if stop.kind == "jit":
        assert stop.truth["jit"] is True
    if stop.kind in PERF_ENV:
        assert stop.truth["perf"] is True


# --- Python frames: JSON, text ---------------------------------------------------------------


def expected_crash(stop):
    """The crash the core records: the first NT_PRSTATUS's pr_cursig and thread; no
    NT_SIGINFO, so no code, address or sender."""
    notes = arm64_harness.read_core_notes(stop.core)
    return {"signal": "SIGABRT", "signo": 6, "code": None, "address": None,
            "thread": notes.threads[0]}


@on(stops())
def test_json(stop):
    """`--json`: every thread (native id, name, GIL) and its Python frames, exactly; the
    crash; the thread that took the signal listed first."""
    report = stop.cli_json()
    check_report(report, stop.truth)
    assert report["python"]["source"] == "core"
    assert report["python"]["pid"] == stop.sc.pid
    assert report["crash"] == expected_crash(stop)
    assert report["threads"][0]["native_id"] == expected_crash(stop)["thread"]


THREAD_HEADER = re.compile(r'^Thread (\d+)(?: "(.*)")?(?: \(holds the GIL\))?:$')


def text_threads(out):
    """{native id: (name, [(function, file, line)])} of a text report."""
    threads, frames = {}, None
    for line in out.splitlines():
        m = THREAD_HEADER.match(line)
        if m:
            assert int(m.group(1)) not in threads, "thread %s twice:\n%s" % (m.group(1), out)
            frames = []
            threads[int(m.group(1))] = (m.group(2), frames)
        elif frames is not None:
            frames.extend(traceback_frames(line))
    return threads


@on(stops())
def test_text(stop):
    """The text report: the crash line, the version, then every thread with its Python
    frames, exactly."""
    out = stop.cli()
    lines = out.splitlines()
    crash = expected_crash(stop)
    name = next(t["name"] for t in stop.truth["threads"] if t["native_id"] == crash["thread"])
    assert lines[0] == 'Crashed: SIGABRT in thread %d "%s"' % (crash["thread"], name), out
    assert "Python %s (core pid %d)" % (stop.truth["python"], stop.sc.pid) in lines, out
    want = {t["native_id"]: (t["name"], expected(t["frames"])) for t in stop.truth["threads"]}
    assert text_threads(out) == want, out


@on(WHY_STOPS)
def test_why_state(stop):
    """`--why`: each thread's state and system call, from its registers and the code at its pc
    (x8 at `svc #0`), and its frames; the text header names the call."""
    report = stop.cli_json("--why")
    check_report(report, stop.truth)
    threads = {t["name"]: t for t in report["threads"]}
    assert set(stop.truth["doing"].values()) == set(DOING), stop.truth["doing"]
    for name, doing in stop.truth["doing"].items():
        t = threads[name]
        assert (t["state"], t["syscall"]) == DOING[doing], (name, t["state"], t["syscall"])
    reader = threads["reader"]["native_id"]
    assert '\nThread %d "reader" [syscall: read]:' % reader in "\n" + stop.cli("--why"), reader


@on(stops("locals"))
def test_locals(stop):
    """`--locals --json`: the stopped frame's locals, each value as the program recorded it."""
    report = stop.cli_json("--locals")
    check_report(report, stop.truth)
    main = stop.truth["threads"][0]
    frames = next(t["frames"] for t in report["threads"] if t["thread_id"] == main["thread_id"])
    shown = [(lc["name"], lc["repr"], lc["is_arg"]) for lc in frames[0]["locals"]]
    assert shown == expected_locals(main["frames"][0])


@on(stops("asyncio"))
def test_async(stop):
    """`--async --json`: every task, edge, frame and loop of the truth (test_asyncio's check)."""
    check_async(stop.cli_json("--async"), stop.truth)


# --- native frames ---------------------------------------------------------------------------


def python_frames(thread):
    return [(f["function"], f["file"], f["line"]) for f in thread["frames"]
            if f["kind"] == "python"]


@on(stops())
def test_native_python_frames(stop):
    """`--native` and `--native-all`: exactly the truth's threads, each with the truth's Python
    frames in order, native frames around them and none unreadable; `--native` hides the
    interpreter's call plumbing between two Python frames."""
    want = {t["native_id"]: expected(t["frames"]) for t in stop.truth["threads"]}
    for flag in ("--native", "--native-all"):
        report = stop.cli_json(flag)
        assert report["errors"] == [], (flag, report["errors"])
        assert sorted(t["native_id"] for t in report["threads"]) == sorted(want), flag
        for t in report["threads"]:
            assert python_frames(t) == want[t["native_id"]], (flag, t["native_id"], t["frames"])
            kinds = [f["kind"] for f in t["frames"]]
            assert "unreadable" not in kinds, (flag, t["frames"])
            # The thread blocks in a system call: native frames below its Python frames
            # (libc's wait, the lock), and the thread's start above them.
            assert kinds[0] == "native" and kinds[-1] == "native", (flag, t["frames"])
        if flag == "--native":
            assert_no_plumbing_between_python(report["threads"])


def gdb_frames(stop, stop_after=()):
    """gdb-multiarch's own frames of every thread of the core (with the PAC mask notes; no
    pyunwind, no libthread_db), as test_native._gdb_frames gives plain gdb's: {lwp: [(pc,
    name or None, module, inlined, file, line, module file)]}; a thread's walk ends after its
    first frame in `stop_after`. The guest names the modules it loaded from host paths (its
    lib-dynload under the root's absolute path, the dwarf stop's library) by those paths, which
    gdb looks up under the sysroot only: its solib-search-path finds them by file name, as
    pyunwind finds them at their own paths."""
    key = tuple(stop_after)
    if key in stop.gdb_frames:
        return stop.gdb_frames[key]
    script = stop.sc.tmpdir / "frames.py"
    script.write_text("STOP_AFTER = %r\n" % (list(stop_after),) + GDB_SCRIPT)
    search = [pathlib.Path(stop.root) / "usr" / "lib" / ("python3.%d" % stop.interp.minor)
              / "lib-dynload"] + ([stop.lib_dir] if stop.lib_dir else [])
    cmd = ["gdb-multiarch", "-nx", "-batch", "-iex", "set auto-load off",
           "-iex", "set debuginfod enabled off",
           "-iex", "set libthread-db-search-path /nonexistent",
           "-ex", "set sysroot %s" % stop.root,
           "-ex", "set solib-search-path %s" % ":".join(map(str, search)),
           "-ex", "source %s" % script,
           stop.interp.guest_exe, stop.pac_core()]
    rc, out, err = harness.run(cmd, GDB_TIMEOUT, env=harness.child_env())
    assert rc == 0, "gdb-multiarch failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    threads = parse_gdb_frames(out)
    assert threads, "gdb-multiarch printed no frames:\n%s\n%s" % (out, err)
    stop.gdb_frames[key] = threads
    return threads


# Not the recursion scenario: gdb-multiarch takes minutes over its ~8,000 native frames of
# sid's builds (test_native_python_frames reads it).
@on([s for s in stops() if not s.endswith(":recursion")])
def test_native_frames_match_gdb(stop):
    """`--native-all` against gdb-multiarch's own unwinding of the core, as on x86-64
    (test_native.check_native_frames_match_gdb): the same threads; every native PC is gdb's,
    in gdb's order, with gdb's module, symbol name, file, line and inlined functions; the
    frames left out are the eval-loop frames the Python runs replace (one per run, all in the
    interpreter). With the JIT on 3.14, up to the JIT frame: gdb unwinds JIT code only where
    CPython registers it with gdb's JIT interface (3.15's `py::jit:executor`, read from the
    core). The core with NT_ARM_PAC_MASK notes gives the same report. With perf trampolines,
    up to the first trampoline frame: gdb alone unwinds none (no symbol, no CFI; its fallback
    follows the frame record at x29 but keeps the signed return address, `0x0020...`, and
    stops), pyunwind's gdb script does (test_gdb_multiarch_jit).

    Files, lines and inlined functions: the roots hold Debian's packages as shipped, stripped
    (their DWARF is in the -dbgsym and -dbg packages tools/arm64.sh does not fetch), so for
    their frames gdb has none, and we must show none either. The dwarf stops' library has
    DWARF: there gdb's file, line and inlined function are compared with ours, and both with
    native_dwarf.c itself."""
    report = stop.cli_json("--native-all")
    assert stop.cli_json("--native-all", core=stop.pac_core())["threads"] == report["threads"]
    jit_code = arm64_harness.anon_exec_ranges(stop.core)
    cut = stop.kind in PERF_ENV or (stop.kind == "jit"
                                    and stop.interp.minor < GDB_UNWINDS_JIT_FROM_MINOR)
    gdb = gdb_frames(stop, jit_code if cut else ())
    jit_frames = check_native_frames_match_gdb(report["threads"], gdb, jit_code, cut)
    assert bool(jit_frames) == (stop.kind == "jit" or stop.kind in PERF_ENV), report["threads"]
    dwarf = [(x[1], os.path.basename(x[4] or ""), x[5],
              [(n, os.path.basename(f or ""), ln) for n, f, ln in x[3]])
             for frames in gdb.values() for x in frames if x[4] or x[3]]
    if stop.kind == "dwarf":
        # The one frame with DWARF: dwarf_call, stopped at its call of `call_inlined`, in
        # which `cb()` runs (the callback).
        src = harness.repo_root() / "tests" / "scenarios" / "native_dwarf.c"
        assert dwarf == [("dwarf_call", "native_dwarf.c", source_line(src, "call_inlined(cb);"),
                          [("call_inlined", "native_dwarf.c", source_line(src, "cb();"))])], dwarf
    else:
        assert dwarf == [], dwarf


def source_line(path, text):
    """The number of the one line of `path` that is `text` (stripped)."""
    with open(path, encoding="utf-8") as f:
        found = [n for n, line in enumerate(f, 1) if line.strip() == text]
    assert len(found) == 1, (path, text, found)
    return found[0]


@on(["arm64-bookworm-3.11:dwarf"])
def test_gdb_check_fails_on_broken_reports(stop):
    """check_native_frames_match_gdb passes on the dwarf stop's report and fails on each of
    test_native.broken_copies of it: its thread dropped; dwarf_call's line moved; the
    innermost native frame renamed, put in another module or dropped; call_inlined dropped."""
    threads = stop.cli_json("--native-all")["threads"]
    gdb = gdb_frames(stop)
    check_native_frames_match_gdb(threads, gdb, [], False)
    for broken in broken_copies(threads):
        with pytest.raises(AssertionError):
            check_native_frames_match_gdb(broken, gdb, [], False)


@on(stops("jit"))
def test_jit_frame(stop):
    """PYTHON_JIT=1: the JIT frame is unwound and named after its executor's code, directly
    above the Python frame that runs it (test_native.test_jit_frames, on arm64)."""
    assert stop.truth["jit"] is True
    # The main thread (recorded first): the thread that took SIGABRT is listed first.
    main = stop.truth["threads"][0]["native_id"]
    for flag in ("--native", "--native-all"):
        t = next(t for t in stop.cli_json(flag)["threads"] if t["native_id"] == main)
        kinds = [f["kind"] for f in t["frames"]]
        assert kinds.count("jit") == 1, (flag, t["frames"])
        j = kinds.index("jit")
        with open(stop.sc.script, encoding="utf-8") as f:
            first = 1 + next(i for i, text in enumerate(f) if text.startswith("def leaf("))
        assert t["frames"][j]["function"] == "[jit] leaf (%s:%d)" % (stop.sc.script, first), flag
        assert in_ranges(arm64_harness.anon_exec_ranges(stop.core), t["frames"][j]["address"])
        assert kinds[j + 1] == "python" and t["frames"][j + 1]["function"] == "leaf", flag


        assert kinds[j + 1] == "python" and t["frames"][j + 1]["function"] == "leaf", flag


def trampoline_names(truth):
    """What each perf trampoline frame of the main thread is named, innermost first: after the
    function it starts (`[trampoline] qualname (file)`, test_jit.test_trampolines_named_after_
    their_code on x86-64), one per Python frame of perf_calls.py (each call its own eval run)."""
    return ["[trampoline] %s (%s)" % (f["function"], f["file"])
            for f in truth["threads"][0]["frames"]]


@on(stops("perf") + stops("perf_jit"))
def test_trampoline_frames(stop):
    """-X perf / -X perf_jit: `--native` and `--native-all` show every trampoline frame (kind
    "jit"), named after the function it starts, at an address in the core's anonymous
    executable memory, directly older than that function's Python frame (the trampoline calls
    the eval loop that runs it); the native unwind goes through each to `_start`, with no error
    entry: as on x86-64. -X perf: the perf map the guest wrote names each copy after the same
    function (-X perf_jit: its jitdump, test_perf_jit_dump)."""
    main = stop.truth["threads"][0]["native_id"]
    anon = arm64_harness.anon_exec_ranges(stop.core)
    addresses = {}
    for flag in ("--native", "--native-all"):
        report = stop.cli_json(flag)
        assert report["errors"] == [], (flag, report["errors"])
        frames = next(t for t in report["threads"] if t["native_id"] == main)["frames"]
        tramps = [k for k, f in enumerate(frames) if f["kind"] == "jit"]
        assert [frames[k]["function"] for k in tramps] == trampoline_names(stop.truth), (
            flag, frames)
        for k in tramps:
            assert in_ranges(anon, frames[k]["address"]), (flag, hex(frames[k]["address"]), anon)
            older = frames[k - 1]
            assert older["kind"] == "python", (flag, k, frames)
            assert frames[k]["function"] == "[trampoline] %s (%s)" % (older["function"],
                                                                      older["file"]), (flag, k)
        assert "unreadable" not in [f["kind"] for f in frames], (flag, frames)
        assert frames[-1]["kind"] == "native" and frames[-1]["function"] == "_start", (
            flag, frames[-1])
        addresses[flag] = [frames[k]["address"] for k in tramps]
    assert addresses["--native"] == addresses["--native-all"], addresses
    if stop.kind == "perf":
        # The perf map the guest wrote (`START SIZE py::qualname:file`, hex, a line per copy,
        # flushed at each) names the copy each frame runs in after the same function.
        rows = [line.split(" ", 2) for line in stop.perf_map.splitlines()]
        named = []
        for a in addresses["--native"]:
            found = [n for start, size, n in rows
                     if int(start, 16) <= a < int(start, 16) + int(size, 16)]
            assert len(found) == 1, (hex(a), found)
            named.append("[trampoline] %s (%s)" % tuple(found[0][len("py::"):].rsplit(":", 1)))
        assert named == trampoline_names(stop.truth), named


JITDUMP_MAGIC = 0x4A695444  # "JiTD" (perf's tools/perf/Documentation/jitdump-specification.txt)
JIT_CODE_LOAD = 0


def jitdump_loads(data):
    """The header (elf_mach, pid) and the JIT_CODE_LOAD records ((code_addr, code_size, name))
    of a jitdump. The guest writes it through a stdio buffer that the kill which dumps the core
    discards: the last records may be cut off, and a cut record is left out."""
    magic, _version, header_size, elf_mach, _pad, pid = struct.unpack_from("<6I", data, 0)
    assert magic == JITDUMP_MAGIC, hex(magic)
    loads, off = [], header_size
    while off + 16 <= len(data):
        rid, size, _ts = struct.unpack_from("<IIQ", data, off)
        if size < 16 or off + size > len(data):
            break
        if rid == JIT_CODE_LOAD:
            _pid, _tid, _vma, addr, code_size, _index = struct.unpack_from("<IIQQQQ", data,
                                                                           off + 16)
            name = data[off + 56:data.index(b"\0", off + 56)].decode()
            loads.append((addr, code_size, name))
        off += size
    return elf_mach, pid, loads


@on(stops("perf_jit"))
def test_perf_jit_dump(stop):
    """-X perf_jit under qemu writes perf's jitdump (/tmp/jit-PID.dump, EM_AARCH64, the guest's
    pid), one JIT_CODE_LOAD record per trampoline copy: the copy each trampoline frame of
    `--native` runs in is recorded under the name CPython gives perf (`py::qualname:file`), the
    function our frame is named after. (The records of the stopped stack are written long before
    the stop; only the last few kilobytes may be lost with the stdio buffer.)"""
    elf_mach, pid, loads = jitdump_loads(stop.jitdump)
    assert (elf_mach, pid) == (arm64_harness.EM_AARCH64, stop.sc.pid)
    main = stop.truth["threads"][0]["native_id"]
    report = stop.cli_json("--native")
    frames = next(t for t in report["threads"] if t["native_id"] == main)["frames"]
    named = []
    for f in frames:
        if f["kind"] == "jit":
            found = [n for a, size, n in loads if a <= f["address"] < a + size]
            assert len(found) == 1, (hex(f["address"]), found)
            named.append("[trampoline] %s (%s)" % tuple(found[0][len("py::"):].rsplit(":", 1)))
    assert named == trampoline_names(stop.truth), named


# --- gdb-multiarch with pyunwind's script: arm64 cores, and a live process under qemu's gdb stub


def gdb_with_pyunwind(root, exe, target_args, commands, timeout=GDB_TIMEOUT, gdb=("gdb-multiarch",),
                      script=None):
    """gdb-multiarch (or the command `gdb`, e.g. an arm64 gdb under qemu) with pyunwind's gdb
    script (the checkout's, or `script`), `commands` run after the target is loaded
    (`target_args`: a core path, or `-ex 'target remote ...'` arguments). Its stdout."""
    script = script or harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py"
    cmd = [*gdb, "-nx", "-batch", "-iex", "set auto-load off",
           "-iex", "set debuginfod enabled off", "-iex", "set sysroot %s" % root,
           "-iex", "source %s" % script, exe, *target_args]
    for c in commands:
        cmd += ["-ex", c]
    rc, out, err = harness.run(cmd, timeout, env=harness.child_env())
    assert rc == 0, "%s failed (%d):\n%s\n%s" % (" ".join(gdb), rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    assert "pyunwind:" not in out + err, out + err
    harness.assert_no_panic(out + err)
    return out


def gdb_json(out):
    found = [line for line in out.splitlines() if line.startswith('{"') and '"python":{' in line]
    assert len(found) == 1, out
    return harness.check_report_schema(json.loads(found[0]))


@on(stops("threads") + stops("locals"))
def test_gdb_multiarch_core(stop):
    """gdb-multiarch reading the arm64 core, pyunwind's commands in it: `py-bt -a --json` is the
    truth; `py-locals`; the `bt` filter puts the Python frames in gdb's own stack (on sid's
    builds, the copy of the core with the PAC mask notes: gdb unwinds no signed return address
    without it)."""
    core = stop.pac_core() if stop.interp.minor >= 14 else stop.core
    out = gdb_with_pyunwind(stop.root, stop.interp.guest_exe, [core],
                            ["py-bt -a --json", "thread apply all bt"])
    check_gdb_bt_all(out, stop.truth)


# `#8  0x0000005500de75b0 [PAC] in [trampoline] leaf (/x/perf_calls.py) () at ...`, `#10 leaf ()
# at ...`: (level, pc, function).
BT_FRAME = re.compile(
    r"^#(\d+)\s+(?:(0x[0-9a-f]+)(?: \[PAC\])? in )?(.*?) \([^()]*\)(?: at | from |$)")


def bt_section(out, lwp):
    """Thread `lwp`'s section of `thread apply all bt`."""
    mine = [s for s in re.split(r"\n(?=Thread \d+ )", out)
            if re.match(r"Thread \d+ .*\bLWP %d\b" % lwp, s)]
    assert len(mine) == 1, (lwp, out)
    return mine[0]


def bt_frames(section):
    """(level, pc or None, function) of each `#N` line of a `bt`."""
    return [(int(m.group(1)), int(m.group(2), 16) if m.group(2) else None, m.group(3))
            for m in map(BT_FRAME.match, section.splitlines()) if m]


@on(stops("jit") + stops("perf") + stops("perf_jit"))
def test_gdb_multiarch_jit(stop):
    """gdb-multiarch with pyunwind's script on the JIT and perf-trampoline stops (the core with
    the PAC mask notes): `py-bt -a --json` and the `bt` filter's Python frames are the truth;
    `bt` names the JIT frame after its executor's code (`[jit] leaf (file:line)`) and each
    trampoline after the function it starts; gdb's own `bt -no-filters` goes, with pyunwind's
    unwinder, through every JIT and trampoline frame (the CLI's, at the same PCs) to `_start`:
    a trampoline's newer neighbour is the eval loop it calls, a 3.14 JIT frame's older one the
    eval loop that runs it (3.15's is `py::jit:executor`, the name CPython registers)."""
    out = gdb_with_pyunwind(stop.root, stop.interp.guest_exe, [stop.pac_core()],
                            ["py-bt -a --json", "thread apply all bt", "echo @@RAW\\n",
                             "thread apply all bt -no-filters"])
    filtered, raw_all = out.split("@@RAW\n")
    check_gdb_bt_all(filtered, stop.truth)
    main = stop.truth["threads"][0]["native_id"]
    anon = arm64_harness.anon_exec_ranges(stop.core)
    named = [f[2] for f in bt_frames(bt_section(filtered, main)) if f[2].startswith("[")]
    if stop.kind == "jit":
        with open(stop.sc.script, encoding="utf-8") as f:
            first = 1 + next(i for i, text in enumerate(f) if text.startswith("def leaf("))
        assert named == ["[jit] leaf (%s:%d)" % (stop.sc.script, first)], filtered
    else:
        assert named == trampoline_names(stop.truth), filtered
    section = bt_section(raw_all, main)
    raw = bt_frames(section)
    assert "Backtrace stopped" not in section and raw[-1][2] == "_start", section
    code = [i for i, f in enumerate(raw) if in_ranges(anon, f[1])]
    cli = next(t for t in stop.cli_json("--native-all")["threads"] if t["native_id"] == main)
    assert [raw[i][1] for i in code] == [
        f["address"] for f in cli["frames"] if f["kind"] == "jit"], (section, cli["frames"])
    for i in code:
        if stop.kind != "jit":
            assert raw[i - 1][2] == "_PyEval_EvalFrameDefault", section
        elif stop.interp.minor < GDB_UNWINDS_JIT_FROM_MINOR:
            assert raw[i][2] == "??" and raw[i + 1][2] == "_PyEval_EvalFrameDefault", section
        else:
            assert raw[i][2] == "py::jit:executor", section


def check_gdb_bt_all(out, truth):
    """The output of `py-bt -a --json` then `thread apply all bt`: the JSON is the truth, and
    the `bt` filter put each thread's Python frames, exactly, in its section."""
    check_report(gdb_json(out), truth)
    for tt in truth["threads"]:
        want = ["%s () at %s:%d" % (f["function"], f["file"], f["line"]) for f in tt["frames"]]
        assert bt_python_frames(out, tt["native_id"]) == want, (tt["name"], out)


BT_PYTHON = re.compile(r"^(?:#\d+\s+)?(\S+ \(\) at .+:\d+)$")


def bt_python_frames(out, lwp):
    """The Python frames (`leaf () at app.py:9`) the `bt` filter put in thread `lwp`'s section
    of `thread apply all bt`."""
    section = re.split(r"\n(?=Thread \d+ )", out)
    mine = [s for s in section if re.match(r"Thread \d+ .*\bLWP %d\b" % lwp, s)]
    assert len(mine) == 1, (lwp, out)
    return [m.group(1) for m in map(BT_PYTHON.match, mine[0].splitlines()) if m]


@pytest.mark.parametrize("interp_id", ["arm64-bookworm-3.11"])
def test_gdb_multiarch_live_stub(interp_id, tmp_path):
    """gdb-multiarch attached to `qemu-aarch64 -g PORT` (no /proc, no `info proc mappings`: the
    modules come from `info auxv` and the dynamic linker's list): `py-bt -a --json` is the
    truth of tests/scenarios/stub_stop.py, stopped by its own SIGUSR1 (qemu's stub cannot
    interrupt a guest blocked in a system call). `py-why --json` tells each thread's system call
    from gdb's registers."""
    interp = arm64_harness.pick(interp_id)
    port = _free_port()
    truth_path = tmp_path / "truth.json"
    script = harness.repo_root() / "tests" / "scenarios" / "stub_stop.py"
    guest = subprocess.Popen([arm64_harness.qemu(), "-g", str(port), "-L", interp.root,
                              interp.guest_exe, str(script), str(truth_path), "-"],
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        out = gdb_with_pyunwind(interp.root, interp.guest_exe,
                                ["-ex", "target remote :%d" % port],
                                ["continue", "py-bt -a --json", "bt", "echo @@WHY\\n", "py-why --json",
                                 "kill"])
        assert "received signal SIGUSR1" in out, out
        out, why = out.split("@@WHY\n")
        truth = json.loads(truth_path.read_text())
        check_report(gdb_json(out), truth)
        main = truth["threads"][0]
        assert bt_python_frames("Thread 1 (LWP %d)\n" % main["native_id"] + out[out.index("\n#0 "):],
                                main["native_id"]) == [
            "%s () at %s:%d" % (f["function"], f["file"], f["line"]) for f in main["frames"]], out
        # py-why through gdb's registers (memory read through gdb: no core notes, no /proc):
        # the call from the code at the pc and x8. The main thread stopped on the signal its own
        # kill(2) raised, as the call returned: its registers still name the call.
        why = gdb_json(why)
        check_report(why, truth)
        assert [(t["name"], t["state"], t["syscall"]) for t in why["threads"]] == [
            ("MainThread", "syscall", "kill"), ("stub-worker", "syscall", "futex")], why
        assert why["threads"][1]["waiting"]["kind"] == "lock", why
    finally:
        guest.kill()
        guest.wait(timeout=30)


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
