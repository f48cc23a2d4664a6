"""lldb on broken input, under integration-lldb (every lldb version): a panic injected into the
Rust module and a bug in the Python frontend are one error line each, and corrupt cores give
a partial report with its error entries; never a Python traceback (run_lldb checks that).
The CLI's and gdb's side of the same checks: test_panic_boundary.py, test_corrupt.py.
"""

import os
import re
import subprocess

import pytest

import harness
from test_corrupt import (assert_no_panic, cores_root, gdb_case, gdb_json_report,  # noqa: F401
                          real_core, workdir)
from test_lldb import failing, lldb_major, lldb_path, mark, run_lldb, split
from test_panic_boundary import (FRONTEND_BUG, FRONTEND_BUG_LINE, INTERP, TIMEOUT, core,  # noqa: F401
                                 env, panic_line)


def test_lldb_panic_is_one_error_line(core):
    cmd = [lldb_path(), "-b", "--no-lldbinit", INTERP.exe, "-c", core,
           "-o", "command script import %s" % (harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"),
           "-o", "pyunwind set frame-provider off",
           "-o", mark("BT"), "-o", failing("py-bt"), "-o", mark("END")]
    rc, out, err = harness.run(cmd, TIMEOUT, env=env("Session.render_bt"))
    assert rc == 0, (rc, out, err)
    # The panic is injected: it must be the boundary's one line, not an uncaught one.
    assert "Traceback" not in out + err, out + err
    assert not [s for s in harness.UNCAUGHT_PANIC_SIGNS if s in out + err], out + err
    got = split(out, ["BT", "END"])
    errors = [line for line in got["BT"].splitlines() if "pyunwind:" in line]
    assert len(errors) == 1 and errors[0].startswith("error: "), got["BT"]
    assert panic_line("Session.render_bt").match(errors[0][len("error: "):]), got["BT"]


def test_lldb_frontend_bug_is_one_error_line(core):
    cmd = [lldb_path(), "-b", "--no-lldbinit", INTERP.exe, "-c", core,
           "-o", "command script import %s" % (harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"),
           "-o", "script " + FRONTEND_BUG[len("python "):],
           "-o", mark("BT"), "-o", failing("py-bt"), "-o", mark("END")]
    rc, out, err = harness.run(cmd, TIMEOUT, env=env(""))
    assert rc == 0 and "Traceback" not in out + err, out + err
    got = split(out, ["BT", "END"])
    errors = [line for line in got["BT"].splitlines() if "pyunwind:" in line]
    assert errors == ["error: " + FRONTEND_BUG_LINE % "lldb"], got["BT"]


# lldb (22 here, and whichever $PYUNWIND_LLDB names) on the same corruptions: a partial report
# with its error entries, the same text, no Python traceback (run_lldb checks that). One
# interpreter keeps it lean; the decoding is the CLI's, checked above on every interpreter.
LLDB_CASES = ["cycle", "code-junk", "huge-string", "thread-frame-unmapped"]
LLDB_INTERP = harness.pick(["pyenv-3.12"])


@pytest.mark.parametrize("case", LLDB_CASES)
@pytest.mark.parametrize("lldb_interp", LLDB_INTERP, ids=lambda i: i.id)
def test_lldb_corrupt_core(lldb_interp, case, real_core, workdir):
    rc = real_core(lldb_interp, "threads")
    path, check = gdb_case(rc, workdir, case)
    out = run_lldb(lldb_interp, mark("JSON"), "py-bt -a --json", mark("TEXT"), "py-bt -a",
                   mark("BT"), "thread backtrace all", core=path)
    got = split(out, ["JSON", "TEXT", "BT"])
    report = gdb_json_report(got["JSON"])
    check(report)
    assert report["errors"], report
    for t in report["threads"]:
        for f in t["frames"]:
            if f["kind"] == "python":
                assert 'line %d, in %s' % (f["line"], f["function"]) in got["TEXT"], f
            elif f["kind"] == "unreadable":
                assert "unreadable frame at %#x" % f["address"] in got["TEXT"], f
    assert_no_panic(out)


# --- the frame provider's fallback (issue 26): lldb's own frames and one line saying why --------

def fallback_line(entry):
    """The one line the provider prints when a panic injected into ``entry`` makes it fall
    back (pyunwind_frontend.fallback_line)."""
    return re.compile(panic_line(entry).pattern.rstrip("$") + re.escape("; showing native frames only") + "$")


def bt_frames(text):
    return re.findall(r"^\s*\*?\s*frame #\d+: (.*)$", text, re.M)


def provider_run(target_args, entry):
    cmd = [lldb_path(), "-b", "--no-lldbinit", *target_args,
           "-o", "command script import %s" % (harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"),
           # The stop is printed (lldb's event thread) before the commands below run.
           "-o", "script import time; time.sleep(0.3)",
           "-o", mark("BT"), "-o", "bt", "-o", mark("ALL"), "-o", "thread backtrace all", "-o", mark("END")]
    rc, out, err = harness.run(cmd, TIMEOUT, env=env(entry))
    assert rc == 0, (rc, out, err)
    assert "Traceback" not in out + err, out + err
    assert not [s for s in harness.UNCAUGHT_PANIC_SIGNS if s in out + err], out + err
    return out, err


@pytest.mark.parametrize("entry", ["Session.core", "Session.frames", "Session.splice"])
def test_lldb_provider_error_is_one_line_and_native_frames(core, entry):
    """A failure in the frame provider (a panic injected where it opens the session, reads the
    thread's Python frames or splices them) leaves lldb's own native frames, to `_start`, and
    prints exactly one line naming the error, for `bt` and `thread backtrace all` of that stop
    together. Without the injection the same commands show Python frames and no such line. lldb
    before 22 has no provider: its bt is lldb's own and says nothing."""
    provider = lldb_major() >= 22
    out, err = provider_run([INTERP.exe, "-c", core], entry)
    got = split(out, ["BT", "ALL", "END"])
    lines = [l for l in (out + err).splitlines() if "pyunwind:" in l]
    if provider:
        assert len(lines) == 1 and fallback_line(entry).match(lines[0]), out + err
    else:
        assert lines == [], out + err
    for part in ("BT", "ALL"):
        frames = bt_frames(got[part])
        assert frames and "[synthetic]" not in got[part], got[part]
        if provider:
            # lldb's own unwind of this build goes to _start (lldb 19's stops at
            # PyObject_Vectorcall).
            assert any("_PyEval_EvalFrameDefault" in f for f in frames), got[part]
            assert "_start" in frames[-1], got[part]
    if provider:
        out, err = provider_run([INTERP.exe, "-c", core], "")
        got = split(out, ["BT", "ALL", "END"])
        assert "pyunwind:" not in out + err, out + err
        assert "[synthetic]" in got["BT"], got["BT"]


def test_lldb_provider_quiet_without_python(tmp_path):
    """No Python in the target is no error: lldb's frames, and no pyunwind line."""
    proc = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = provider_run(["-p", str(proc.pid)], "")
    finally:
        proc.kill()
        proc.wait()
    got = split(out, ["BT", "ALL", "END"])
    assert "pyunwind:" not in out + err, out + err
    assert bt_frames(got["BT"]), got["BT"]


def test_lldb_provider_corrupt_thread_list(core, tmp_path):
    """A core whose `_PyRuntime.interpreters.head` points nowhere: the session opens but no
    thread can be read, and the one line says where reading stopped; lldb's own frames."""
    from corefile import CoreFile
    from test_corrupt import RUNTIME_INTERPRETERS_HEAD, UNMAPPED_ADDRESS, dynamic_symbol, first_load_vaddr

    provider = lldb_major() >= 22
    bad = tmp_path / "core.bad"
    bad.write_bytes(open(core, "rb").read())
    c = CoreFile(bad)
    module = os.path.realpath(INTERP.libpython)
    start = [s for s, _, off, path in c.mapped_files() if off == 0 and path == module]
    assert len(start) == 1, start
    head = (start[0] - first_load_vaddr(module) + dynamic_symbol(module, "_PyRuntime")
            + RUNTIME_INTERPRETERS_HEAD[INTERP.minor])
    with open(bad, "r+b") as f:
        f.seek(c.offset_of(head, 8))
        f.write(UNMAPPED_ADDRESS.to_bytes(8, "little"))
    out, err = provider_run([INTERP.exe, "-c", str(bad)], "")
    got = split(out, ["BT", "ALL", "END"])
    lines = [l for l in (out + err).splitlines() if "pyunwind:" in l]
    want = ("pyunwind: cannot read target memory: memory not available at %#x; showing native frames only"
            % UNMAPPED_ADDRESS)
    assert lines == ([want] if provider else []), out + err
    assert bt_frames(got["BT"]) and "[synthetic]" not in got["ALL"], got["ALL"]


C_THREAD = """\
import ctypes, sys
sys.path.insert(0, %r)
import _truth
# A thread that never runs Python: pause() started by pthread_create itself.
libc = ctypes.CDLL(None)
tid = ctypes.c_ulong()
assert libc.pthread_create(ctypes.byref(tid), None, ctypes.cast(libc.pause, ctypes.c_void_p), None) == 0
def main():
    _truth.ready(); _truth.HELD.acquire()
main()
"""


def test_lldb_provider_quiet_for_a_thread_without_python(tmp_path):
    """A C thread in a Python process is no error: its native frames and no line; the Python
    thread shows its Python frames (lldb 22)."""
    provider = lldb_major() >= 22
    script = tmp_path / "c_thread.py"
    script.write_text(C_THREAD % str(harness.scenarios_dir()))
    with harness.Scenario(INTERP, "c_thread", script=script) as sc:
        out, err = provider_run(["-p", str(sc.pid)], "")
    got = split(out, ["BT", "ALL", "END"])
    assert "pyunwind:" not in out + err, out + err
    threads = got["ALL"].split("thread #")[1:]
    assert len(threads) == 2, got["ALL"]
    python = [t for t in threads if "c_thread.py" in t]
    assert len(python) == (1 if provider else 0), got["ALL"]
    if provider:
        assert re.search(r"frame #\d+: main at c_thread\.py:\d+ \[synthetic\]", python[0]), got["ALL"]
    c = [t for t in threads if "c_thread.py" not in t]
    assert c and "pause" in c[-1] and bt_frames(c[-1]), got["ALL"]
