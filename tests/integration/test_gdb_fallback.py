"""No silent fallback in gdb: when the frame filter or the JIT unwinder meets an error, `bt`
still shows gdb's native frames, and one line says what failed:
`pyunwind: <error>; showing native frames only`, once per stop (not per frame, nor per thread
or per `bt` of the same stop). A target with no Python in it, or a thread that never ran
Python, is no error: nothing is printed.

Each failure is forced: a panic injected into one entry point of the core with
PYUNWIND_TEST_PANIC (src/panic.rs), or a core corrupted where the thread list starts. The
native frames are checked against gdb's own: `bt -no-filters` in the same run (the filter),
or gdb with our JIT unwinder disabled (the unwinder).
"""

import os
import re
import subprocess
import textwrap

import pytest

import harness
import jit_harness as jh
from corefile import CoreFile
from test_corrupt import RUNTIME_INTERPRETERS_HEAD, UNMAPPED_ADDRESS, dynamic_symbol, first_load_vaddr
from test_stacks import gdb_cmd

INTERP = harness.pick(["pyenv-3.12"])[0]
SID = jh.sid_interps()
GDB_TIMEOUT = 120
SUFFIX = "; showing native frames only"
# `#3  0x00007f… in fn (...) at file:1`, `#4  fn (...)` (an inline frame has no pc).
FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(.*?) \(")


def test_interpreters_present():
    assert INTERP.id == "pyenv-3.12"
    assert sorted(i.id for i in SID) == ["debian-3.14", "debian-3.15"]


def panic_fallback(entry):
    """The exact line for a panic injected into ``entry``."""
    return re.compile(r"pyunwind: internal error in %s at src/panic\.rs:\d+:\d+: "
                      r"injected by PYUNWIND_TEST_PANIC=%s%s$" % (re.escape(entry), re.escape(entry),
                                                                 re.escape(SUFFIX)))


def run(cmd, env_extra=None, env_base=None):
    env = harness.child_env(dict(env_base or {}, DEBUGINFOD_URLS="", **(env_extra or {})))
    rc, out, err = harness.run(cmd, GDB_TIMEOUT, env=env)
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    for bad in ("Traceback (most recent call last)", "Python Exception", "Error occurred in Python"):
        assert bad not in out + err, out + err
    return out, err


def ours(out, err):
    """Our lines in gdb's output and messages: the line goes to gdb's stderr, but
    `thread apply` captures both streams of the command it runs into its stdout."""
    return [line for line in (out + "\n" + err).splitlines() if line.startswith("pyunwind:")]


def sections(out):
    parts = re.split(r"^@@(\w+)$", out, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def frames(text):
    """(level, pc or None, function) of every frame line."""
    return [(int(m.group(1)), m.group(2), m.group(3)) for m in map(FRAME.match, text.splitlines()) if m]


def mark(name):
    return "echo @@%s\\n" % name


# --- the frame filter -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shapes():
    with harness.Scenario(INTERP, "shapes") as sc:
        yield sc, sc.make_core()


FILTER_COMMANDS = ("set print frame-arguments none", mark("BT"), "bt", mark("AGAIN"), "bt", mark("ALL"),
                   "thread apply all bt", mark("RAW"), "bt -no-filters", mark("END"))


def check_native_only(out, err, line):
    """One line, `line` (a regex or the text), for a whole stop; every `bt` is gdb's own."""
    got = ours(out, err)
    assert len(got) == 1, err
    assert (line.match(got[0]) if hasattr(line, "match") else got[0] == line), (got, line)
    s = sections(out)
    raw = frames(s["RAW"])
    assert len(raw) > 5 and raw[-1][2] == "_start", s["RAW"]
    assert frames(s["BT"]) == raw == frames(s["AGAIN"]), out
    assert "shapes.py" not in s["BT"] + s["ALL"], out


@pytest.mark.parametrize("entry", ["Session.core", "Session.python_thread", "Session.splice", "Session.decorators"])
def test_filter_error_is_one_line_and_native_frames(shapes, entry):
    """Whichever step of the filter fails (opening the session, finding the thread, reading
    its frames, splicing them), bt shows gdb's own frames after one line saying why."""
    sc, core = shapes
    out, err = run(gdb_cmd(INTERP, *FILTER_COMMANDS, core=core), {"PYUNWIND_TEST_PANIC": entry})
    check_native_only(out, err, panic_fallback(entry))


def test_real_frames_error_is_one_line(shapes):
    """`set pyunwind-frames real`: when the real-frames unwinder cannot read a thread's runs,
    gdb keeps its own frames for them (no Python frame is a gdb frame of its own) and one line
    says why, once for the stop."""
    sc, core = shapes
    out, err = run(gdb_cmd(INTERP, "set pyunwind-frames real", *FILTER_COMMANDS, core=core),
                   {"PYUNWIND_TEST_PANIC": "Session.runs"})
    got = ours(out, err)
    assert len(got) == 1 and panic_fallback("Session.runs").match(got[0]), err
    s = sections(out)
    raw = frames(s["RAW"])
    assert len(raw) > 5 and raw[-1][2] == "_start", s["RAW"]
    # The filter still names the Python frames; none has a gdb frame (a level) of its own.
    assert "leaf" in s["BT"] and frames(s["BT"]) == frames(s["AGAIN"]), out


def test_filter_on_a_core_with_no_thread_list(shapes, tmp_path):
    """A core whose `_PyRuntime.interpreters.head` points nowhere: the session opens, but no
    thread can be found, and the line says where reading stopped (`next` of the
    interpreter state, at offset 0 in every version)."""
    sc, core = shapes
    bad = tmp_path / "core.bad"
    bad.write_bytes(open(core, "rb").read())
    c = CoreFile(bad)
    module = os.path.realpath(INTERP.libpython)
    start = [s for s, _, off, path in c.mapped_files() if off == 0 and path == module]
    assert len(start) == 1, start
    head = start[0] - first_load_vaddr(module) + dynamic_symbol(module, "_PyRuntime") + RUNTIME_INTERPRETERS_HEAD[12]
    with open(bad, "r+b") as f:
        f.seek(c.offset_of(head, 8))
        f.write(UNMAPPED_ADDRESS.to_bytes(8, "little"))
    out, err = run(gdb_cmd(INTERP, *FILTER_COMMANDS, core=str(bad)))
    check_native_only(out, err, "pyunwind: cannot read target memory: memory not available at %#x%s"
                      % (UNMAPPED_ADDRESS, SUFFIX))
    # The same untouched core shows its Python frames, with no line.
    out, err = run(gdb_cmd(INTERP, "set print frame-arguments none", "bt", core=core))
    assert ours(out, err) == [] and "leaf () at " in out, (out, err)


def test_filter_line_once_per_stop_live():
    """A live process: the line comes once for a stop however often bt runs, and again at the
    next stop (the scenario stops itself with SIGTRAP once told to go on; gdb kills it then,
    before its next SIGTRAP)."""
    with harness.Scenario(INTERP, "finish") as sc:
        out, err = run(gdb_cmd(INTERP, "set print frame-arguments none", mark("BT1"), "bt", "bt",
                               "shell echo go > %s" % (sc.tmpdir / "go"), "continue", mark("BT2"), "bt", "bt",
                               mark("END"), "kill", pid=sc.pid),
                       {"PYUNWIND_TEST_PANIC": "Session.splice"}, INTERP.env)
        assert "SIGTRAP" in out, out
        got = ours(out, err)
        assert len(got) == 2 and all(panic_fallback("Session.splice").match(g) for g in got), err
        s = sections(out)
        for name in ("BT1", "BT2"):
            assert frames(s[name]) and "finish.py" not in s[name], s[name]


C_THREAD = textwrap.dedent("""\
    import ctypes, os, sys
    sys.path.insert(0, %r)
    import _truth
    # A thread that never runs Python: pause() started directly by pthread_create.
    libc = ctypes.CDLL(None)
    tid = ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(tid), None, ctypes.cast(libc.pause, ctypes.c_void_p), None) == 0
    def main():
        _truth.ready(); _truth.HELD.acquire()
    main()
    """)


def test_no_line_for_a_thread_without_python(tmp_path):
    """A C thread in a Python process is no error: its native frames, no line; the Python
    thread's bt has its Python frames."""
    script = tmp_path / "c_thread.py"
    script.write_text(C_THREAD % str(harness.scenarios_dir()))
    with harness.Scenario(INTERP, "c_thread", script=script) as sc:
        out, err = run(gdb_cmd(INTERP, "set print frame-arguments none", "thread apply all bt", pid=sc.pid),
                       env_base=INTERP.env)
    assert ours(out, err) == [], err
    threads = re.split(r"^Thread \d+ ", out, flags=re.M)[1:]
    assert len(threads) == 2, out
    python = [t for t in threads if "c_thread.py" in t]
    assert len(python) == 1 and re.search(r"^#\d+\s+main \(\) at \S+c_thread\.py:\d+$", python[0], re.M), out
    c = [t for t in threads if "c_thread.py" not in t][0]
    assert re.search(r"\bpause\b", c) and frames(c), c


def test_no_line_for_a_program_without_python():
    """gdb on a program with no Python at all (the filter and the unwinder run for it too)."""
    proc = subprocess.Popen(["sleep", "120"])
    try:
        out, err = run([*harness.gdb_argv(), "-q", "-batch", "-nx", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
                        "-x", str(harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py"),
                        "-ex", "bt", "-ex", "info unwinder", "-p", str(proc.pid)])
    finally:
        proc.kill()
        proc.wait()
    assert ours(out, err) == [], (out, err)
    assert frames(out) and "pyunwind-jit" in out, out


# --- the JIT unwinder ---------------------------------------------------------------------------


@pytest.fixture(scope="module", params=SID, ids=lambda i: i.id)
def jit_core(request):
    """A gcore core of sid's 3.14 / 3.15 stopped in a C call made by JIT code."""
    with harness.Scenario(request.param, "jit_call", env={"PYTHON_JIT": "1"}) as sc:
        assert sc.truth["jit"] is True
        yield request.param, sc.make_core()


@pytest.mark.parametrize("entry", ["Jit.core", "Jit.unwind"])
def test_jit_unwinder_error_is_one_line_and_gdbs_frames(jit_core, entry):
    """Opening the JIT map or unwinding a JIT frame fails: one line, and the frames are those
    gdb finds with our unwinder disabled."""
    interp, core = jit_core
    commands = ("set print frame-arguments none", mark("RAW"), "bt -no-filters", mark("AGAIN"), "bt -no-filters",
                mark("END"))
    out, err = run(jh.gdb_cmd(interp, *commands, core=core), {"PYUNWIND_TEST_PANIC": entry})
    got = ours(out, err)
    assert len(got) == 1 and panic_fallback(entry).match(got[0]), err
    plain, plain_err = run(jh.gdb_cmd(interp, "disable unwinder global pyunwind-jit", *commands, core=core))
    assert ours(plain, plain_err) == [], plain_err
    s, p = sections(out), sections(plain)
    assert frames(s["RAW"]) == frames(p["RAW"]) == frames(s["AGAIN"]), (s["RAW"], p["RAW"])
    assert len(frames(s["RAW"])) > 5, s["RAW"]
    good, good_err = run(jh.gdb_cmd(interp, *commands, core=core))
    assert ours(good, good_err) == [], good_err
    if interp.minor == 14:
        # 3.14's JIT code keeps no frame pointer and has no CFI: only our unwinder gets past
        # it, so the frames above are gdb's own indeed. (3.15 registers its JIT code with
        # gdb, which unwinds it alone; the line shows that ours failed.)
        assert frames(sections(good)["RAW"]) != frames(p["RAW"]), good
