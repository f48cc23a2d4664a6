"""The panic boundary (src/panic.rs): a panic in any entry point is the module's own one-line
error naming the entry and the source location, in the CLI and gdb (lldb:
test_lldb_robust.py); never Rust's
panic message, pyo3's PanicException (a BaseException) or a Python traceback.

The panic is injected on purpose with PYUNWIND_TEST_PANIC=ENTRY, on one gcore core of a real
process (pyenv 3.12, `shapes`), shared by every test here.
"""

import re

import pytest

import harness
from test_corrupt import assert_no_python_error, run_gdb

INTERP = [i for i in harness.interpreters() if i.id == "pyenv-3.12"][0]
TIMEOUT = 60


def panic_line(entry):
    """The exact one-line error of a panic injected into ``entry``."""
    return re.compile(r"pyunwind: internal error in %s at src/panic\.rs:\d+:\d+: "
                      r"injected by PYUNWIND_TEST_PANIC=%s$" % (re.escape(entry), re.escape(entry)))


@pytest.fixture(scope="module")
def core():
    with harness.Scenario(INTERP, "shapes") as sc:
        yield sc.make_core()


def env(entry):
    return harness.child_env(dict(INTERP.env, PYUNWIND_TEST_PANIC=entry))


@pytest.mark.parametrize("entry", ["cli", "cli-args"])
def test_cli_panic_is_one_line_and_exit_1(core, entry):
    rc, out, err = harness.run([harness.cli_path(), "core", core, "--json"], TIMEOUT, env=env(entry))
    assert (rc, out) == (1, ""), (rc, out, err)
    assert len(err.splitlines()) == 1 and panic_line(entry).match(err.strip()), err


def test_cli_without_injection_reports(core):
    rc, out, err = harness.run([harness.cli_path(), "core", core], TIMEOUT, env=env(""))
    assert rc == 0 and "in leaf" in out and err == "", (rc, out, err)


def test_gdb_panic_is_one_error_line(core, monkeypatch):
    monkeypatch.setenv("PYUNWIND_TEST_PANIC", "Session.render_bt")
    rc, out, cmd = run_gdb(INTERP.exe, core, [
        "py-bt",
        # The class gdb's and lldb's frontends catch is an Exception, as are our errors.
        "python import _pyunwind; print('@@', issubclass(_pyunwind.Error, Exception))"])
    assert_no_python_error(out, cmd)
    # gdb prints a command's error on stderr, after the output of every command.
    errors = [line for line in out.splitlines() if "pyunwind" in line]
    assert [panic_line("Session.render_bt").match(line) is not None for line in errors] == [True], out
    assert "@@ True" in out, out


def test_gdb_bt_keeps_native_frames_when_the_filter_panics(core, monkeypatch):
    monkeypatch.setenv("PYUNWIND_TEST_PANIC", "Session.splice")
    rc, out, cmd = run_gdb(INTERP.exe, core, ["echo @@BT\\n", "bt"])
    assert_no_python_error(out, cmd)
    out = out.split("@@BT\n")[1]
    # The filter falls back to gdb's own frames: the whole native stack, no Python frame.
    frames = re.findall(r"^#(\d+) ", out, re.M)
    assert frames == [str(i) for i in range(len(frames))] and len(frames) > 5, out
    assert "_PyEval_EvalFrameDefault" in out and re.search(r"^#\d+ .* in _start \(\)$", out, re.M), out
    assert not re.search(r"shapes\.py:\d+$", out, re.M), out


# A bug in the Python frontend itself (here: every py-* command divides by zero) is one line
# too, never a traceback.
FRONTEND_BUG = "python import pyunwind_frontend as fe; fe.Commands.run = lambda *a: 1 // 0"
FRONTEND_BUG_LINE = ("pyunwind: internal error in the %s frontend: "
                     "ZeroDivisionError: integer division or modulo by zero")


def test_gdb_frontend_bug_is_one_error_line(core, monkeypatch):
    monkeypatch.delenv("PYUNWIND_TEST_PANIC", raising=False)
    rc, out, cmd = run_gdb(INTERP.exe, core, [FRONTEND_BUG, "py-bt"])
    assert_no_python_error(out, cmd)
    assert [line for line in out.splitlines() if "pyunwind" in line] == [FRONTEND_BUG_LINE % "gdb"], out
