"""lldb on broken input, under integration-lldb (every lldb version): a panic injected into the
Rust module and a bug in the Python frontend are one error line each, and corrupt cores give
a partial report with its error entries; never a Python traceback (run_lldb checks that).
The CLI's and gdb's side of the same checks: test_panic_boundary.py, test_corrupt.py.
"""

import pytest

import harness
from test_corrupt import (assert_no_panic, cores_root, gdb_case, gdb_json_report,  # noqa: F401
                          real_core, workdir)
from test_lldb import failing, lldb_path, mark, run_lldb, split
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
