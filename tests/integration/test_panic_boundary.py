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
from test_corrupt import assert_clean_failure, assert_no_traceback, run_gdb

INTERP = harness.pick(["pyenv-3.12"])[0]
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
def test_cli_panic_is_one_line_and_its_own_exit_status(core, entry):
    rc, out, err = harness.run([harness.cli_path(), "core", core, "--json"], TIMEOUT, env=env(entry))
    # EX_SOFTWARE: apart from a clean error's 1.
    assert (rc, out) == (70, ""), (rc, out, err)
    assert len(err.splitlines()) == 1 and panic_line(entry).match(err.strip()), err


def test_checkers_count_a_caught_panic(core):
    """The caught panic is one clean-looking line, and still a failure for every checker."""
    rc, out, err = harness.run([harness.cli_path(), "core", core, "--json"], TIMEOUT, env=env("cli"))
    assert harness.panic_in(err, rc) == err.strip()
    # Even with the exit status of a clean error, the marker alone gives it away.
    assert harness.panic_in(err, 1) == err.strip()
    with pytest.raises(AssertionError, match="panicked"):
        assert_clean_failure(rc, out, err, "injected panic")
    with pytest.raises(AssertionError, match="panicked"):
        assert_clean_failure(1, out, err, "injected panic")
    with pytest.raises(AssertionError, match="panicked"):
        harness.assert_no_panic("pyunwind: internal error in the gdb frontend: KeyError: 'x'")
    # ... and a clean one-line error is not a panic.
    rc, out, err = harness.run([harness.cli_path(), "core", "/nonexistent.core"], TIMEOUT, env=env(""))
    assert harness.panic_in(err, rc) is None
    assert_clean_failure(rc, out, err, "missing core")


def test_cli_without_injection_reports(core):
    rc, out, err = harness.run([harness.cli_path(), "core", core], TIMEOUT, env=env(""))
    assert rc == 0 and "in leaf" in out and err == "", (rc, out, err)


def test_gdb_panic_is_one_error_line(core, monkeypatch):
    monkeypatch.setenv("PYUNWIND_TEST_PANIC", "Session.render_bt")
    rc, out, cmd = run_gdb(INTERP.exe, core, [
        "py-bt",
        # The class gdb's and lldb's frontends catch is an Exception, as are our errors.
        "python import _pyunwind; print('@@', issubclass(_pyunwind.Error, Exception))"])
    assert_no_traceback(out, cmd)
    # gdb prints a command's error on stderr, after the output of every command.
    errors = [line for line in out.splitlines() if "pyunwind" in line]
    assert [panic_line("Session.render_bt").match(line) is not None for line in errors] == [True], out
    assert "@@ True" in out, out


def test_gdb_bt_keeps_native_frames_when_the_filter_panics(core, monkeypatch):
    monkeypatch.setenv("PYUNWIND_TEST_PANIC", "Session.splice")
    rc, out, cmd = run_gdb(INTERP.exe, core, ["echo @@BT\\n", "bt"])
    assert_no_traceback(out, cmd)
    # Not silently: one line says why (test_gdb_fallback.py has the other paths).
    said = [line for line in out.splitlines() if "pyunwind" in line]
    assert len(said) == 1 and panic_line("Session.splice").match(
        said[0][:-len("; showing native frames only")]) and said[0].endswith("; showing native frames only"), out
    out = out.split("@@BT\n")[1]
    # The filter falls back to gdb's own frames: the whole native stack, no Python frame.
    frames = re.findall(r"^#(\d+) ", out, re.M)
    assert frames == [str(i) for i in range(len(frames))] and len(frames) > 5, out
    assert "_PyEval_EvalFrameDefault" in out and re.search(r"^#\d+ .* in _start \(\)$", out, re.M), out
    assert not re.search(r"shapes\.py:\d+$", out, re.M), out


# A bug in the Python frontend itself (here: every py-* command looks up a key that is not
# there) is one line too, never a traceback. A KeyError's text is the same in every Python the
# debuggers embed (a ZeroDivisionError's changed in 3.14).
FRONTEND_BUG = "python import pyunwind_frontend as fe; fe.Commands.run = lambda *a: {}['no-such-key']"
FRONTEND_BUG_LINE = "pyunwind: internal error in the %s frontend: KeyError: 'no-such-key'"


def test_gdb_frontend_bug_is_one_error_line(core, monkeypatch):
    monkeypatch.delenv("PYUNWIND_TEST_PANIC", raising=False)
    rc, out, cmd = run_gdb(INTERP.exe, core, [FRONTEND_BUG, "py-bt"])
    assert_no_traceback(out, cmd)
    assert [line for line in out.splitlines() if "pyunwind" in line] == [FRONTEND_BUG_LINE % "gdb"], out
